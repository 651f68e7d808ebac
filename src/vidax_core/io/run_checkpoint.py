"""``model.checkpoint`` (and ``model.files``) of a run, resolved: a diffusers folder or hub repo, a plugin's built-in
or foreign layout, a ComfyUI models folder or single files per component (:mod:`.component_files`), each checked
against the model id (the plugin's ``check_checkpoint`` hook) before any weight is read."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from vidax_core.errors import UserError
from vidax_core.io.checkpoint import Checkpoint, download_from_hub, resolve_checkpoint


def checkpoint_for_run(cfg: Any, spec: Any, plugins: Any, *, configs_only: bool = False) -> Checkpoint:
    """``model.checkpoint`` (and ``model.files``) of a run resolved with the model plugin's built-in and
    foreign-layout hooks, then checked against the model id (the plugin's ``check_checkpoint`` hook) before any
    weight is read. A folder no plugin claims that holds ComfyUI's model sub-folders, and any ``model.files``, make a
    :class:`vidax_core.io.component_files.FilesCheckpoint`."""
    value = cfg.model.checkpoint
    files = getattr(cfg.model, "files", None)
    comfy = None
    if value and not files and os.path.isdir(os.path.expanduser(value)):
        from vidax_core.io.component_files import comfy_root

        path = os.path.expanduser(value)
        root = comfy_root(path)
        if not os.path.exists(os.path.join(path, "model_index.json")) and root:
            opened = plugins.call("open_checkpoint", spec, path=root)  # a release in ComfyUI's layout (LTX-2.5)
            if opened is not None:
                opened.source = value
                return checked(opened, cfg, spec, plugins)
            comfy = path
    if files or comfy:
        return checked(_files_checkpoint(cfg, spec, plugins, files, comfy), cfg, spec, plugins)
    if not value:
        where = (f"; its original release is {spec.original_repo}" if getattr(spec, "original_repo", None) else "")
        raise UserError(f"no checkpoint given for {spec.id}: no diffusers-layout repo is published for it{where}; set "
                        f"model.checkpoint to a local folder (docs/models/{spec.family}.md#checkpoints), a ComfyUI "
                        "models folder, or name the files with model.files")
    ckpt = resolve_checkpoint(
        value,
        revision=cfg.model.revision,
        find_builtin=lambda name: plugins.call("builtin_checkpoint", spec, name=name),
        builtin_key=spec.id,
        configs_only=configs_only,
        open_folder=lambda path: plugins.call("open_checkpoint", spec, path=path),
        default_repo=spec.hub_repo,
    )
    return checked(ckpt, cfg, spec, plugins)


def _files_checkpoint(cfg: Any, spec: Any, plugins: Any, files: Any, comfy: str | None) -> Checkpoint:
    """The run's single-file checkpoint: ``model.files`` over a ComfyUI folder, a local checkpoint folder, or the
    id's published layout (configs, scheduler); tokenizers the files do not carry come from the id's hub repo."""
    from vidax_core.io.component_files import open_files
    from vidax_core.io.published import PublishedCheckpoint, has_layout

    value = cfg.model.checkpoint
    own_repo = not value or value == spec.hub_repo
    if comfy is None and value and not own_repo:
        base = checkpoint_for_run(dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, files=None)),
                                  spec, plugins)
    elif has_layout(spec.id, plugins):
        base = PublishedCheckpoint(spec.id, plugins)
    else:
        raise UserError(f"{spec.id} ships no published layout to take its configs from: give model.files together "
                        "with model.checkpoint=<a diffusers-layout folder of the model> for the rest")

    def fetch_tokenizer(component: str) -> str | None:
        if not spec.hub_repo:
            return None
        folder = download_from_hub(spec.hub_repo, spec.hub_revision, [component])
        return os.path.join(folder, component) if os.path.isdir(os.path.join(folder, component)) else None

    source = comfy or ("model.files" + (f" over {value}" if value and not own_repo else ""))
    return open_files(spec, plugins, files=files, folder=comfy, base=base, source=source,
                      fetch_tokenizer=fetch_tokenizer)


def checked(ckpt: Checkpoint, cfg: Any, spec: Any, plugins: Any) -> Checkpoint:
    """``ckpt`` once the model plugin's ``check_checkpoint`` hook found nothing wrong with it for ``cfg``."""
    problems = plugins.call("check_checkpoint", spec, ckpt=ckpt, run=cfg) or []
    if problems:
        raise UserError(str(problems[0]))
    return ckpt
