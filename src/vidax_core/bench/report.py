"""Facts about the machine and the files a benchmark writes (JSON and markdown), shared by every bench command."""

from __future__ import annotations

import json
import os
import platform
from typing import Any


def device_memory() -> dict[str, Any]:
    import jax

    peaks, in_use = [], []
    for d in jax.local_devices():
        try:
            st = d.memory_stats()
        except Exception:  # noqa: BLE001 - backends without stats
            st = None
        if not st:
            return {"device_peak_bytes": None, "device_bytes_in_use": None}
        peaks.append(int(st.get("peak_bytes_in_use", st.get("bytes_in_use", 0))))
        in_use.append(int(st.get("bytes_in_use", 0)))
    return {"device_peak_bytes": max(peaks) if peaks else None, "device_bytes_in_use": max(in_use) if in_use else None}


def _json_default(o: Any) -> Any:
    try:
        import numpy as np

        if isinstance(o, np.generic):
            return o.item()
        if isinstance(o, np.ndarray):
            return o.tolist()
    except ImportError:  # pragma: no cover
        pass
    return str(o)


def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
    }
    try:
        import psutil

        info["memory_gb"] = round(psutil.virtual_memory().total / 2**30, 1)
        info["load_avg_1m"] = round(os.getloadavg()[0], 2)
    except Exception:  # noqa: BLE001
        pass
    try:
        import jax

        info["jax"] = jax.__version__
        info["jax_backend"] = jax.default_backend()
        info["jax_devices"] = [getattr(d, "device_kind", d.platform) for d in jax.devices()]
    except Exception:  # noqa: BLE001
        pass
    return info


def write_report(report: dict[str, Any], out_dir: str, name: str) -> tuple[str, str]:
    os.makedirs(out_dir, exist_ok=True)
    jpath, mpath = os.path.join(out_dir, f"{name}.json"), os.path.join(out_dir, f"{name}.md")
    with open(jpath, "w") as f:
        json.dump(report, f, indent=2, default=_json_default)
    with open(mpath, "w") as f:
        f.write(report["markdown"])
    return jpath, mpath
