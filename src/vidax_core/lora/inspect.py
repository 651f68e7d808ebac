"""``vidax lora inspect FILE MODEL_ID [--checkpoint C] [--expert E]``: what an adapter touches, without running.

Prints the file's layout, its modules (the file's names and the checkpoint names they map to), their ranks,
alphas and the resulting factor, and which parts each has (down/up, diff, bias deltas). With ``--checkpoint``
every module is checked exactly as a run checks it (one ``error:`` line for a bad adapter); without, names are
mapped by the family's rename alone (kohya names need the checkpoint to find their dots).
"""

from __future__ import annotations

import re
from typing import Any

from vidax_core.errors import UserError
from vidax_core.lora import check, files, formats, names, plan

LAYOUT_TEXT = {
    "diffusers": "diffusers / peft (transformer.<module>.lora_A/lora_B)",
    "original": "original names (diffusion_model.<module>: ComfyUI, lightx2v, Kijai, CausVid files)",
    "kohya": "kohya / musubi-tuner (lora_unet_<module>.lora_down/lora_up + alpha)",
}
PART_TEXT = {"down": "lora_down/A", "up": "lora_up/B", "up_bias": "lora_B.bias", "alpha": "alpha", "diff": "diff",
             "diff_b": "diff_b", "dora": "dora_scale"}


def _groups(modules: list[str]) -> str:
    """``blocks 0-39 (400 modules), head.head`` style summary of module names."""
    blocks: dict[str, set[int]] = {}
    counts: dict[str, int] = {}
    rest = []
    for m in modules:
        hit = re.match(r"^(.*?)[._](\d+)[._]", m)
        if hit:
            blocks.setdefault(hit[1], set()).add(int(hit[2]))
            counts[hit[1]] = counts.get(hit[1], 0) + 1
        else:
            rest.append(m)
    parts = [f"{g} {min(ix)}-{max(ix)} ({counts[g]} modules)" for g, ix in blocks.items()]
    return ", ".join(parts + sorted(rest)) or "none"


def _name(target: Any) -> str:
    """A rename's answer as text: the module, or its pieces joined with ``+``."""
    return target if isinstance(target, str) else "+".join(dict.fromkeys(t[0] for t in target))


def describe(path: str, model_id: str, *, checkpoint: str | None = None, expert: str | None = None,
             weight_name: str | None = None) -> str:
    from vidax_core.plugins import get_plugins

    plugins = get_plugins()
    spec = plugins.registry.get(model_id)
    key_map, experts = plan.family_lora(plugins, spec)
    where = "lora inspect"
    adapter = formats.normalise(files.read(path, weight_name, where))
    target: dict[str, str | None]
    checked = ""
    if checkpoint is not None:
        from vidax_core import config as config_mod
        from vidax_core.io.run_checkpoint import checkpoint_for_run

        cfg = config_mod.resolve_layers({"model": {"id": model_id, "checkpoint": checkpoint}}, [], plugins.preset_for)
        ckpt = checkpoint_for_run(cfg, spec, plugins)
        builds = plugins.call("build_dit", spec, ckpt=ckpt, run=cfg)  # the denoiser components, nothing built
        comps = [b.component for b in (builds if isinstance(builds, (list, tuple)) else [builds])]
        if len(comps) > 1 and expert is None:
            raise UserError(f"{spec.id} has {len(comps)} experts ({', '.join(experts) or ', '.join(comps)}): "
                            "pass --expert NAME (the one this adapter is for)")
        comp = plan.component_for(config_mod.LoraEntry(path=path, expert=expert), "lora", spec, comps, experts)
        _, targets = plan.read_adapter(path, weight_name, where, key_map, ckpt.read_tensors(comp), spec.id)
        target = {}
        for t in targets:
            target[t.record.name] = f"{target[t.record.name]}+{t.module}" if t.record.name in target else t.module
        checked = f"checked against {ckpt.source} ({comp}): every module fits"
    else:
        problems = adapter.problems + [p for r in adapter.records.values() for p in check.record_problems(r)]
        if problems:
            raise UserError(f"{where} ({adapter.path}): {len(problems)} problems: " + "; ".join(problems[:check.SHOWN]))
        layout = adapter.layout if adapter.layout != "kohya" else "original"
        rename = names.renamer("diffusers" if layout == "plain" else layout, key_map)
        target = {n: (_name(rename(n)) if adapter.layout != "kohya" else None) for n in adapter.records}
        checked = "not checked against a checkpoint (give --checkpoint to check every module as a run does)"
    recs = list(adapter.records.values())
    ranks = sorted({r.rank for r in recs if r.rank})
    alphas = sorted({r.alpha for r in recs if r.alpha is not None})
    counts: dict[str, int] = {}
    for r in recs:
        for p in r.parts:
            counts[PART_TEXT[p]] = counts.get(PART_TEXT[p], 0) + 1
    lines = [
        f"file:     {adapter.path}",
        f"format:   {LAYOUT_TEXT.get(adapter.layout, adapter.layout)}",
        f"model:    {spec.id} ({spec.family}); {checked}",
        f"modules:  {len(recs)}: {_groups(list(adapter.records))}",
        f"rank:     {', '.join(map(str, ranks)) or 'none (full deltas only)'}",
        f"alpha:    {', '.join(f'{a:g}' for a in alphas) or 'none (factor 1, or the peft config in the metadata)'}",
        f"parts:    {', '.join(f'{k} x{v}' for k, v in counts.items())}",
        "",
        f"{'module (file)':<44} {'-> checkpoint module':<44} {'rank':>4} {'alpha':>6} {'factor':>7}  parts",
    ]
    for r in recs:
        to = target.get(r.name) or "(by the checkpoint)"
        alpha = f"{r.alpha:g}" if r.alpha is not None else "-"
        lines.append(f"{r.name:<44} {to:<44} {r.rank or '-':>4} {alpha:>6} {adapter.factor(r):>7.4g}  "
                     + ",".join(PART_TEXT[p] for p in r.parts))
    return "\n".join(lines)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("lora", help="inspect LoRA adapters", description="LoRA adapters (see docs/lora.md).")
    lsub = p.add_subparsers(dest="lora_command", metavar="COMMAND", parser_class=p.__class__)
    i = lsub.add_parser("inspect", help="print what an adapter touches (layers, rank, alpha, format) without running")
    i.add_argument("file", help="the adapter (.safetensors file, or a folder with one)")
    i.add_argument("model_id", help="the model id it is for (see `vidax list-models`)")
    i.add_argument("--checkpoint", default=None, help="check every module against this checkpoint, as a run does")
    i.add_argument("--expert", default=None, help="the expert it is for, on a model with several (high_noise, ...)")
    i.add_argument("--weight-name", default=None, help="the file inside a folder")
    i.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    i.set_defaults(func=cmd_inspect)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1], debug=False)


def cmd_inspect(args: Any) -> int:
    print(describe(args.file, args.model_id, checkpoint=args.checkpoint, expert=args.expert,
                   weight_name=args.weight_name))
    return 0
