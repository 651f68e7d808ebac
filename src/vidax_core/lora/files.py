"""Finding and reading an adapter file: a ``.safetensors`` file, a folder holding one, or a hub repo id.

Only safetensors is read (a pickled ``.pt`` adapter could execute code); the reader is the core's memory-mapped
one, so a truncated or corrupt file is one ``error:`` line naming it.
"""

from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from vidax_core.errors import UserError
from vidax_core.io.safetensors import SafetensorsFile

#: the file name diffusers' ``save_lora_weights`` writes (and ``load_lora_weights`` looks for first)
DIFFUSERS_WEIGHT_NAME = "pytorch_lora_weights.safetensors"
#: safetensors metadata key under which diffusers stores the peft ``LoraConfig`` of each component
METADATA_KEY = "lora_adapter_metadata"


@dataclass
class AdapterFile:
    """The tensors (name -> memory-mapped array) and the safetensors metadata of one adapter file."""

    path: str
    tensors: Mapping[str, np.ndarray]
    metadata: Mapping[str, str]

    def peft_config(self, prefix: str = "transformer") -> dict[str, Any] | None:
        """The peft ``LoraConfig`` fields diffusers saved for ``prefix`` (``r``, ``lora_alpha``, ``rank_pattern``,
        ``alpha_pattern``, ``use_rslora``...), or None when the file carries none."""
        raw = self.metadata.get(METADATA_KEY)
        if not raw:
            return None
        try:
            data = json.loads(raw)
        except (TypeError, ValueError, RecursionError):
            raise UserError(f"{self.path}: its {METADATA_KEY} metadata is not JSON (or nested too deeply): re-save "
                            "the adapter") from None
        if not isinstance(data, dict):
            return None
        found = {k[len(prefix) + 1:]: v for k, v in data.items() if k.startswith(prefix + ".")}
        return found or (data if "lora_alpha" in data or "r" in data else None)


def locate(path: str, weight_name: str | None, where: str) -> str:
    """The adapter file ``path`` names (``where`` names the config entry in errors)."""
    path = os.path.expanduser(path)
    if os.path.isdir(path):
        if weight_name:
            f = os.path.join(path, weight_name)
            if not os.path.isfile(f):
                raise UserError(f"{where}: folder {path} has no {weight_name}")
            return _safetensors_name(f, where)
        files = sorted(glob.glob(os.path.join(path, "*.safetensors")))
        if os.path.join(path, DIFFUSERS_WEIGHT_NAME) in files:
            return os.path.join(path, DIFFUSERS_WEIGHT_NAME)
        if len(files) != 1:
            what = "no .safetensors file" if not files else f"{len(files)} .safetensors files"
            raise UserError(f"{where}: folder {path} holds {what}: name the file with weight_name")
        return files[0]
    if os.path.exists(path):
        return _safetensors_name(path, where)
    from vidax_core.io.checkpoint import looks_like_repo_id

    if looks_like_repo_id(path) and not path.endswith(".safetensors"):
        return _from_hub(path, weight_name, where)
    raise UserError(f"{where}: adapter file {path} does not exist")


def _safetensors_name(path: str, where: str) -> str:
    if not path.endswith(".safetensors"):
        raise UserError(f"{where}: {path} is not a .safetensors file: vidax reads adapters only as safetensors "
                        "(re-save a .pt/.ckpt adapter with safetensors.torch.save_file)")
    return path


def _from_hub(repo: str, weight_name: str | None, where: str) -> str:
    """The adapter from the local Hugging Face cache, else downloaded; without a network (``HF_HUB_OFFLINE``, or
    the hub's host not reachable within ``HUB_TIMEOUT_S``) one line at once instead of the hub client's retries."""
    from huggingface_hub import constants, hf_hub_download, try_to_load_from_cache

    name = weight_name or DIFFUSERS_WEIGHT_NAME
    how = f"download {name} of {repo} on a connected machine and give its local path"
    try:
        cached = try_to_load_from_cache(repo, name)
    except Exception:  # noqa: BLE001 - a name the cache cannot hold is looked up on the hub, which says why
        cached = None
    if isinstance(cached, str):
        return cached
    if constants.HF_HUB_OFFLINE:
        raise UserError(f"{where}: hub repo {repo} is not in the local Hugging Face cache and HF_HUB_OFFLINE is set: "
                        f"{how}")
    down = _unreachable(constants.ENDPOINT)
    if down:
        raise UserError(f"{where}: hub repo {repo} is not in the local Hugging Face cache and {constants.ENDPOINT} "
                        f"cannot be reached ({down}): {how}")
    try:
        return hf_hub_download(repo, name, etag_timeout=HUB_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - unknown repo, missing file, a failed transfer: one line either way
        raise UserError(f"{where}: cannot fetch {name} from hub repo {repo} ({clip(exc)}): {how}") from None


HUB_TIMEOUT_S = 5.0


def _unreachable(endpoint: str) -> str | None:
    """Why the hub's host cannot be reached (name lookup or TCP connect within ``HUB_TIMEOUT_S``), or None. Behind
    a proxy the host is reached through it: not probed."""
    import socket
    from urllib.parse import urlsplit

    if any(os.environ.get(k) for k in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return None
    u = urlsplit(endpoint)
    try:
        socket.create_connection((u.hostname or "", u.port or (443 if u.scheme == "https" else 80)),
                                 timeout=HUB_TIMEOUT_S).close()
    except OSError as exc:
        return clip(exc.strerror or exc)
    return None


def clip(text: Any, limit: int = 200) -> str:
    """``text`` on one line, cut at a word boundary (never mid-word) when longer than ``limit``."""
    one = " ".join(str(text).split())
    if len(one) <= limit:
        return one
    return one[:limit].rsplit(" ", 1)[0].rstrip(",;:") + " ..."


def read(path: str, weight_name: str | None = None, where: str = "lora") -> AdapterFile:
    """Locate and open an adapter (no tensor data is read until used)."""
    f = locate(path, weight_name, where)
    try:
        st = SafetensorsFile(f)
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None
    if not len(st):
        raise UserError(f"{where}: {f} holds no tensors: is it an adapter?")
    return AdapterFile(f, st, st.metadata)
