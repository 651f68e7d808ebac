"""Checkpoints in diffusers layout: a local folder, a hub repo id, or a plugin's ``builtin:<name>``.

A local folder in another layout (e.g. the original Wan-AI release files) may be claimed by the model's plugin
through the ``open_checkpoint`` hook, which returns a :class:`Checkpoint` subclass answering the same API
(``config``, ``tensors``, ``has``, ``require``, ``model_index``, ``source``, ``root``) in diffusers terms.

A diffusers-layout checkpoint is a folder with ``model_index.json`` and one sub-folder per component
(``transformer/``, ``vae/``, ``text_encoder/``, ``tokenizer/``, ``scheduler/``), each with its ``config.json``
(``scheduler_config.json`` for the scheduler) and safetensors weights, single or sharded with ``*.index.json``.
Architecture numbers are read from these configs, so a tiny checkpoint runs under the same model id as the
real one.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import glob
import json
import math
import os
import stat
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from vidax_core.io.arch import SOURCE_KEY  # Checkpoint.config records its file under this key
from vidax_core.errors import UserError
from vidax_core.io.safetensors import SafetensorsFile

REQUIRED_COMPONENTS = ("transformer", "vae", "text_encoder", "tokenizer", "scheduler")
# Every component folder a run may read (hub downloads fetch those present; optional ones serve some models).
DIFFUSERS_COMPONENTS = REQUIRED_COMPONENTS + ("transformer_2", "image_encoder", "image_processor", "text_tokenizer")


class TensorSource(Mapping[str, np.ndarray]):
    """All tensors of one component: key -> memory-mapped array, across every safetensors shard."""

    def __init__(self, files: Sequence[str]) -> None:
        self.files = [SafetensorsFile(f) for f in files]
        self._where: dict[str, SafetensorsFile] = {}
        for f in self.files:
            for k in f:
                self._where[k] = f

    def __getitem__(self, key: str) -> np.ndarray:
        return self._where[key][key]

    def nbytes(self, key: str) -> int:
        return self._where[key].nbytes(key)

    def shape(self, key: str) -> tuple[int, ...]:
        return tuple(self._where[key].shape(key))

    def dtype(self, key: str) -> np.dtype:
        return self._where[key].dtype(key)

    @property
    def metadata(self) -> dict[str, Any]:
        """The files' safetensors metadata, merged."""
        out: dict[str, Any] = {}
        for f in self.files:
            out.update(f.metadata)
        return out

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)


class ProgressTensors(Mapping[str, np.ndarray]):
    """A tensor mapping that reports the bytes of each tensor as it is read."""

    def __init__(self, source: Mapping[str, np.ndarray], on_bytes: Callable[[int], None]) -> None:
        self._source, self._on = source, on_bytes

    def __getitem__(self, key: str) -> np.ndarray:
        from vidax_core.quant.source import Quantized

        arr = self._source[key]
        held = isinstance(arr, Quantized) and hasattr(self._source, "nbytes")  # an 8-bit weight, read as it is placed
        self._on(int(self._source.nbytes(key) if held else getattr(arr, "nbytes", 0)))
        return arr

    def dtype(self, key: str) -> np.dtype:
        from vidax_core.quant.source import dtype_of

        return dtype_of(self._source, key)

    def shape(self, key: str) -> tuple[int, ...]:
        from vidax_core.quant.source import shape_of

        return shape_of(self._source, key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._source)

    def __len__(self) -> int:
        return len(self._source)


def parsed_once(read: Callable[[Any, str], dict[str, Any]]) -> Callable[[Any, str], dict[str, Any]]:
    """A checkpoint's ``config(component)`` read once per checkpoint object (one load): later calls return a copy
    of the first answer, so planning a call reads and checks no JSON file again. Every :class:`Checkpoint`
    subclass's own ``config`` is wrapped so too; each class's answer is kept apart (a subclass that transforms
    ``super().config(c)`` keeps both)."""

    @functools.wraps(read)
    def config(self: Any, component: str) -> dict[str, Any]:
        kept = self.__dict__.setdefault("_parsed_configs", {})
        key = (read, component)
        if key not in kept:
            kept[key] = read(self, component)
        return copy.deepcopy(kept[key])

    config.parsed_once = True  # type: ignore[attr-defined]
    return config


class Checkpoint:
    """A resolved local checkpoint folder in diffusers layout. ``config`` parses each component's JSON once
    (:func:`parsed_once`); the object lives as long as one load."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = vars(cls).get("config")
        if callable(own) and not getattr(own, "parsed_once", False):
            cls.config = parsed_once(own)

    # (component, total bytes or None) -> callback(bytes read); set by the pipeline to show loading progress
    progress: Callable[[str, int | None], Callable[[int], None]] | None = None

    def __init__(self, root: str, source: str | None = None) -> None:
        self.root = root
        self.source = source or root
        index = os.path.join(root, "model_index.json")
        self.model_index: dict[str, Any] = _read_json(index) if os.path.exists(index) else {}

    def path(self, component: str) -> str:
        return os.path.join(self.root, component)

    def has(self, component: str) -> bool:
        return os.path.isdir(self.path(component))

    def require(self, component: str) -> str:
        p = self.path(component)
        if not os.path.isdir(p):
            raise UserError(
                f"checkpoint {self.source} has no {component}/ folder: a diffusers-layout checkpoint needs "
                f"{', '.join(c + '/' for c in REQUIRED_COMPONENTS)}"
            )
        return p

    @parsed_once
    def config(self, component: str) -> dict[str, Any]:
        folder = self.require(component)
        for name in ("config.json", "scheduler_config.json", "preprocessor_config.json"):
            f = os.path.join(folder, name)
            if os.path.lexists(f):
                data = _read_json(f)
                if name == "scheduler_config.json":
                    _check_scheduler_config(f, data)
                data[SOURCE_KEY] = f
                return data
        raise UserError(f"checkpoint component {folder} has no config.json")

    def weight_files(self, component: str) -> list[str]:
        folder = self.require(component)
        indexes = sorted(glob.glob(os.path.join(folder, "*.safetensors.index.json")))
        if indexes:
            data = _read_json(indexes[0])
            weight_map = data.get("weight_map")
            if not isinstance(weight_map, dict) or not weight_map or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in weight_map.items()
            ):
                raise UserError(f"{indexes[0]}: weight_map must be a JSON object of tensor name -> shard file name")
            names = sorted(set(weight_map.values()))
            bad = [n for n in names if os.path.basename(n) != n or not n.endswith(".safetensors")]
            if bad:
                raise UserError(f"{indexes[0]}: weight_map names {bad[0]!r:.80}, not a .safetensors file in {folder}")
            files = [os.path.join(folder, n) for n in names]
            missing = [f for f in files if not os.path.exists(f)]
            if missing:
                raise UserError(f"{indexes[0]} names shards that are missing: "
                                f"{', '.join(map(os.path.basename, missing))}")
            return files
        files = sorted(glob.glob(os.path.join(folder, "*.safetensors")))
        if not files:
            raise UserError(f"checkpoint component {folder} has no .safetensors weights")
        return files

    def read_tensors(self, component: str) -> Mapping[str, np.ndarray]:
        """The component's tensors (key -> lazily read array); layouts other than diffusers override this."""
        return TensorSource(self.weight_files(component))

    # a loaded pipe keeps each component's tensor source open, so rebuilding a part reads no file header again
    keep_open: bool = False

    def tensors(self, component: str) -> Mapping[str, np.ndarray]:
        """:meth:`read_tensors`, reporting bytes read to ``self.progress`` when one is attached."""
        if self.keep_open:
            sources = self.__dict__.setdefault("_open_sources", {})
            if component not in sources:
                sources[component] = self.read_tensors(component)
            source = sources[component]
        else:
            source = self.read_tensors(component)
        if self.progress is None:
            return source
        total = sum(source.nbytes(k) for k in source) if hasattr(source, "nbytes") else None
        return ProgressTensors(source, self.progress(component, total))

    # set by a loaded pipe: keeps the models hooks build through :meth:`model` between calls
    kept_models: Any = None  # vidax_core.runner.encoders.KeptModels
    # set by the run: the dtype those models compute in (vidax_core.encoders.policy.EncoderPolicy)
    encoder_policy: Any = None

    @contextlib.contextmanager
    def model(self, component: str, build: Callable[[], Any]) -> Iterator[Any]:
        """``build()``'s model (an image encoder made from ``component``) for one use, in the run's encoder dtype:
        built and dropped after it, or in a loaded pipe built once and kept between calls as
        ``runtime.text_encoder`` says."""
        if self.encoder_policy is not None:
            from vidax_core.encoders.policy import encoder_policy

            inner, policy = build, self.encoder_policy

            def build() -> Any:
                with encoder_policy(policy):
                    return inner()
        if self.kept_models is None:
            yield build()
        else:
            with self.kept_models.use(component, build) as model:
                yield model

    def close(self) -> None:
        """Drop the tensor sources kept open and the models kept for a loaded pipe."""
        self.__dict__.pop("_open_sources", None)
        if self.kept_models is not None:
            self.kept_models.close()

    def forget(self, component: str) -> None:
        """Drop ``component``'s kept tensor source (its files are unmapped once nothing else reads them): the
        denoiser's, once its weights are placed."""
        self.__dict__.get("_open_sources", {}).pop(component, None)


MAX_JSON_BYTES = 512 << 20  # the largest tokenizer.json files are tens of MiB


def read_json_file(path: str, max_bytes: int = MAX_JSON_BYTES) -> Any:
    """The JSON value in ``path``, read with bounds: a regular file of at most ``max_bytes``, UTF-8, bounded
    nesting. Every failure is one :class:`UserError` line naming the file.

    ``Infinity``, ``-Infinity`` and ``NaN`` are read as Python's json (and so diffusers) reads them: configs
    written by Python hold them (DPMSolverMultistepScheduler's ``lambda_min_clipped: -Infinity``). The typed
    reads of :mod:`vidax_core.io.arch` refuse a non-finite value where it is meaningless, naming the key."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise UserError(f"{path} is not a regular file: replace it with the JSON file of the checkpoint")
        if st.st_size > max_bytes:
            raise UserError(f"{path} is {st.st_size >> 20} MiB, too large for a checkpoint JSON file: re-download it")
        with open(path, "rb") as f:
            raw = f.read(max_bytes + 1)
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(raw) > max_bytes:
        raise UserError(f"{path} is too large for a checkpoint JSON file: re-download it")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path} is not valid JSON (not UTF-8 text at byte {exc.start}): "
                        "fix or re-download it") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{path} is not valid JSON (line {exc.lineno}): fix or re-download it") from None
    except RecursionError:
        raise UserError(f"{path} is not usable JSON (nested too deeply): fix or re-download it") from None
    except ValueError as exc:
        raise UserError(f"{path} is not usable JSON ({exc}): fix or re-download it") from None


def _read_json(path: str) -> dict[str, Any]:
    data = read_json_file(path)
    if not isinstance(data, dict):
        raise UserError(f"{path} must hold a JSON object")
    return data


# scheduler fields where diffusers gives an infinite value a meaning (no clipping)
NON_FINITE_OK = frozenset({"lambda_min_clipped"})


def _check_scheduler_config(path: str, data: Mapping[str, Any]) -> None:
    """The scheduler config must give a working sampler: built and planned here, so a junk value is one line
    naming the file now, not a crash after the weights loaded. An unsupported scheduler class is left to the
    run's sampler choice (the user may name another sampler)."""
    for key, value in data.items():
        if isinstance(value, float) and not math.isfinite(value) and key not in NON_FINITE_OK:
            raise UserError(f"{path}: {key} must be a finite number, got {value}: fix or re-download it")
    steps = data.get("num_train_timesteps", 1000)
    if type(steps) is not int or not 1 <= steps <= 1_000_000:
        raise UserError(f"{path}: num_train_timesteps must be an integer from 1 to 1000000, got {str(steps)[:40]}")
    from vidax_core.schedulers import base as sched_base

    errors = (ValueError, TypeError, ArithmeticError, KeyError, IndexError, AttributeError)
    try:
        sampler = sched_base.sampler_from_scheduler_config(dict(data))
    except sched_base.SchedulerConfigError:
        return
    except errors as exc:
        raise UserError(f"{path} has a value the scheduler cannot use ({_detail(exc)}): "
                        "fix or re-download it") from None
    try:
        # a resolution-dependent shift needs a token count: any will do for this check
        extra = {"seq_len": 256} if getattr(sampler, "use_dynamic_shifting", False) else {}
        arrays = sampler.plan(2, **extra).arrays()
    except errors as exc:
        raise UserError(f"{path} has a value the scheduler cannot use ({_detail(exc)}): "
                        "fix or re-download it") from None
    if not sched_base.plan_values_ok(arrays):
        raise UserError(f"{path} gives non-finite timesteps or sigmas: fix or re-download it")


def _detail(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:160] or type(exc).__name__


def hub_allow_patterns(components: Sequence[str], configs_only: bool = False) -> list[str]:
    """The files of ``components`` a run needs (only their JSON files for ``configs_only``)."""
    pats = ["model_index.json"]
    for c in components:
        files = ("json",) if configs_only else ("json", "safetensors", "model", "txt", "jinja")
        pats += [f"{c}/*.{ext}" for ext in files]
    return pats


def looks_like_repo_id(value: str) -> bool:
    parts = value.split("/")
    return len(parts) == 2 and all(parts) and not value.startswith((".", "/", "~"))


def download_from_hub(repo_id: str, revision: str | None, components: Sequence[str], configs_only: bool = False) -> str:
    """Fetch only the files the run needs into the standard Hugging Face cache; return the snapshot folder.

    What is cached already is used as is; what is missing is downloaded with huggingface_hub's own progress bars
    and one line before them (``--quiet`` turns both off: ``HF_HUB_DISABLE_PROGRESS_BARS``).
    Offline or unreachable, one :class:`UserError` line says how to get the files."""
    import sys

    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError
    from huggingface_hub.utils import are_progress_bars_disabled

    at = f" at revision {revision}" if revision else ""
    if (not constants.HF_HUB_OFFLINE and not configs_only and not are_progress_bars_disabled()
            and not _cached(repo_id, revision, components)):
        print(f"fetching {repo_id}{at} ({', '.join(c + '/' for c in components)} as present) into the Hugging Face "
              f"cache {constants.HF_HUB_CACHE}: first use only", file=sys.stderr, flush=True)
    try:
        return snapshot_download(repo_id, revision=revision,
                                 allow_patterns=hub_allow_patterns(components, configs_only))
    except LocalEntryNotFoundError as exc:
        why = ("HF_HUB_OFFLINE is set" if constants.HF_HUB_OFFLINE
               else f"the hub ({constants.ENDPOINT}) cannot be reached")
        get = f"hf download {repo_id}" + (f" --revision {revision}" if revision else "")
        raise UserError(
            f"checkpoint {repo_id}{at} is not in the local Hugging Face cache and {why}: pre-download it with "
            f"`{get}` on a connected machine (same HF_HOME), or set model.checkpoint to a local folder"
        ) from exc
    except RevisionNotFoundError as exc:
        raise UserError(f"hub repository {repo_id} has no revision {revision!r}: fix model.revision") from exc
    except RepositoryNotFoundError as exc:
        raise UserError(f"hub repository {repo_id} does not exist or is private "
                        "(set HF_TOKEN for gated repos)") from exc
    except Exception as exc:
        raise UserError(f"cannot download {repo_id} from the hub: {str(exc).splitlines()[0]}") from exc


def _cached(repo_id: str, revision: str | None, components: Sequence[str]) -> bool:
    """Whether the cache holds a snapshot of ``repo_id`` at ``revision`` with weights in every component folder
    it has (then nothing is downloaded and no "fetching" line is printed)."""
    from huggingface_hub import snapshot_download

    try:
        folder = snapshot_download(repo_id, revision=revision, local_files_only=True,
                                   allow_patterns=hub_allow_patterns(components))
    except Exception:  # noqa: BLE001 - not cached (or not fully)
        return False
    folders = [c for c in components if os.path.isdir(os.path.join(folder, c))]
    return bool(folders) and all(os.listdir(os.path.join(folder, c)) for c in folders)


def local_snapshot(repo_id: str, revision: str | None) -> str | None:
    """The cached snapshot folder of ``repo_id`` at ``revision`` when its denoiser's weights are there (a full
    download), else None; never reaches the network."""
    from huggingface_hub import snapshot_download

    try:
        folder = snapshot_download(repo_id, revision=revision, local_files_only=True,
                                   allow_patterns=hub_allow_patterns(DIFFUSERS_COMPONENTS))
    except Exception:  # noqa: BLE001 - not cached
        return None
    weights = glob.glob(os.path.join(folder, "transformer", "*.safetensors"))
    return folder if weights else None


def resolve_checkpoint(
    value: str | None,
    *,
    revision: str | None = None,
    components: Sequence[str] = DIFFUSERS_COMPONENTS,
    find_builtin: Callable[[str], str | None] | None = None,
    builtin_key: str = "",
    configs_only: bool = False,
    open_folder: Callable[[str], Checkpoint | None] | None = None,
    default_repo: str | None = None,
) -> Checkpoint:
    """Turn ``model.checkpoint`` into a local :class:`Checkpoint`.

    ``find_builtin(name)`` returns the folder of a plugin's built-in checkpoint (None if it has none);
    ``configs_only`` fetches only the JSON files of a hub checkpoint (``--dry-run``); ``open_folder(path)`` lets
    the model's plugin claim a local folder that is not in diffusers layout (its ``open_checkpoint`` hook);
    ``default_repo``: the model id's own hub repo (its errors then name no local folder).
    """
    if not value:
        raise UserError(f"no checkpoint given{' for ' + builtin_key if builtin_key else ''}: set model.checkpoint to "
                        "a diffusers-layout folder, a ComfyUI models folder or a hub repo id")
    if value.startswith("builtin:"):
        name = value.split(":", 1)[1]
        folder = find_builtin(name) if find_builtin is not None else None
        if folder is None:
            raise UserError(f"model {builtin_key} has no built-in checkpoint named {name!r}"
                            + ("" if name == "tiny-random" else ": the built-in of a model that has one is "
                               "builtin:tiny-random"))
        return Checkpoint(folder, source=value)
    path = os.path.expanduser(value)
    if os.path.isdir(path):
        # a folder without model_index.json goes to the plugin first: a release layout may have a transformer/
        # folder of its own (HunyuanVideo-1.5's transformer/<variant>/); a bare diffusers folder is read if it declines
        indexed = os.path.exists(os.path.join(path, "model_index.json"))
        if not indexed:
            opened = open_folder(path) if open_folder is not None else None
            if opened is not None:
                opened.source = value
                return opened
        if not indexed and not os.path.isdir(os.path.join(path, "transformer")):
            raise UserError(
                f"checkpoint folder {value} is not in diffusers layout (no model_index.json or transformer/ folder) "
                f"nor in another layout the plugin of {builtin_key or 'this model'} recognizes (see its docs)"
            )
        return Checkpoint(path, source=value)
    if os.path.exists(path):
        raise UserError(f"checkpoint {value} is a file: name single files per component with model.files "
                        f"(e.g. model.files={{transformer: {value}, text_encoder: ..., vae: ...}}), or give their "
                        "ComfyUI models folder, a diffusers-layout folder or a hub repo id as model.checkpoint")
    if looks_like_repo_id(value):
        parent = value.split("/")[0]
        if os.path.isdir(parent):  # a path into an existing folder, not an organisation on the hub
            raise UserError(f"checkpoint: there is no folder {value} (in {os.path.abspath(parent)}): check the path, "
                            "or give a hub repo id (Org/Name) that is not also a local folder name")
        try:
            return Checkpoint(download_from_hub(value, revision, components, configs_only), source=value)
        except UserError as exc:
            if value == default_repo:  # the id's own repo (its preset's): no local folder was meant
                raise
            raise UserError(f"checkpoint {value}: no local folder {os.path.abspath(value)}, and as a hub repo id: "
                            f"{str(exc).removeprefix(f'checkpoint {value} ')}") from None
    raise UserError(f"checkpoint {value} does not exist (expected a local folder or a hub repo id like Org/Name)")
