"""``vidax bench --random-dit``: one DiT call of a published architecture with random weights, no weights read.

The architecture is the run's own: ``model.id`` + ``model.checkpoint`` (a config-only folder or a hub id: only
the JSON files are read) + the sampling sizes give the denoiser (``build_dit``) and its latent grid, exactly as
``vidax run`` would build them; with ``--published`` the checkpoint is the id's published layout that ships with its
plugin (:mod:`vidax_core.bench.random_checkpoint`, written with ``--fill zeros`` into a temporary folder: no
download, no torch). The conditioning files (``image``, ``video``) are not read: an image-to-video denoiser's extra
inputs come from ``example_inputs`` like the rest. ``--random-blocks N`` keeps N blocks of every stacked group at
full width (default 2, ``all`` for the full depth; the step time of the full model is then about ``per-block x
blocks``). Weights: ``model.dtype`` (default the device's policy: bf16 on GPU/TPU), drawn on the device.
Attention: each backend of ``--attention`` in turn.

Measured per backend: compile time of the batch-``--batch`` call (one guided step's model work, CFG = 2), the
median call time over ``--repeats``, FLOPs (the family's count), achieved FLOP/s and MFU. With
``--offload CHUNKS`` (e.g. ``1,2``) the block groups are streamed from host memory (``pinned_host`` where the
backend has it, else pageable numpy; the kind used is reported) ``chunk`` blocks at a time with the next
chunk's transfer issued before this chunk's compute, as the offload executor does; reported: the streamed call
time, the same staged program with every chunk already on the device (``resident_s``), the host-to-device
time per chunk alone, and the hidden fraction of the transfer, ``1 - (streamed - resident) / transfer`` clipped
to [0, 1].

The text context and any extra model inputs are drawn from the build's ``example_inputs`` (structured contexts:
LTX-Video's hidden states + mask, HunyuanVideo's hidden + mask + pooled and its guidance input), or one context
array of the config's text width. Results: ``OUT/NAME.json`` + ``OUT/NAME.md``. :func:`trace` runs the same set-up
abstractly (``jax.eval_shape``: no weights, no compile), so every id can be checked at its reference size on CPU.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import shutil
import statistics
import tempfile
import time
from typing import Any, Iterator

from vidax_core.bench.arguments import check_random_blocks
from vidax_core.errors import UserError


def _example_inputs(build: Any, batch: int, grid: tuple[int, int, int], text: int) -> tuple[Any, Any, dict]:
    """(latents, context, kwargs) of one model call: the build's own, or the sampler's latents and one context
    array of the config's width."""
    latents = (tuple(build.latent_shape(batch, grid)), "float32")
    if build.example_inputs is not None:
        x, ctx, kw = build.example_inputs(batch, grid, text)
        return (latents if x is None else x), ctx, kw
    for name in ("text_dim", "context_dim", "text_embed_dim"):
        width = getattr(build.config, name, None)
        if isinstance(width, int):
            return latents, ((batch, text, width), build.param_dtype), {}
    raise UserError(f"--random-dit: {type(build.config).__name__} states no text context shape "
                    "(its plugin's DitBuild gives no example_inputs): report it to the plugin's authors")


def _draw(shapes: Any, rng) -> Any:
    """Arrays for a pytree of (shape, dtype) pairs (normal floats, all-valid (ones) masks and integers) and arrays
    (kept)."""
    import jax.numpy as jnp
    import numpy as np

    def one(sd):
        shape, dtype = sd
        if np.issubdtype(np.dtype(dtype), np.floating) or dtype == jnp.bfloat16:
            return jnp.asarray(rng.standard_normal(shape), dtype)
        return jnp.ones(shape, dtype)

    return _map_pairs(one, shapes)


def _map_pairs(fn, tree: Any) -> Any:
    """Map ``fn`` over the ``(shape, dtype)`` pairs of a nested dict/list/tuple."""
    if isinstance(tree, dict):
        return {k: _map_pairs(fn, v) for k, v in tree.items()}
    if isinstance(tree, tuple) and len(tree) == 2 and isinstance(tree[0], tuple):
        return fn(tree)
    if hasattr(tree, "shape") and hasattr(tree, "dtype"):
        import jax.numpy as jnp

        return jnp.asarray(tree)
    if isinstance(tree, (list, tuple)):
        return type(tree)(_map_pairs(fn, v) for v in tree)
    raise TypeError(f"example_inputs: expected (shape, dtype) pairs, got {tree!r}")


def _cut_state(abstract: Any, groups: dict[str, int], blocks: int | None) -> list[tuple[Any, Any, Any]]:
    """(path, variable, ShapeDtypeStruct) of every leaf of an abstract state, the stacked groups cut to
    ``blocks``."""
    import jax
    import numpy as np
    from flax import nnx

    from vidax_core.nn.state import leaf_value

    out = []
    for path, var in nnx.to_flat_state(abstract):
        leaf = leaf_value(var)
        shape = tuple(leaf.shape)
        if blocks and path and str(path[0]) in groups and shape:
            shape = (min(blocks, shape[0]),) + shape[1:]
        out.append((path, var, jax.ShapeDtypeStruct(shape, np.dtype(leaf.dtype))))
    return out


def _with_values(leaves: list[tuple[Any, Any, Any]], values: list[Any]) -> Any:
    from flax import nnx

    return nnx.from_flat_state([(path, var.replace(v) if hasattr(var, "replace") else v)
                                for (path, var, _), v in zip(leaves, values)])


_POOL = 1 << 20  # normal draws every leaf is cut from
_HOST_LEAF = 1 << 22  # leaves up to this many elements are made on the host


def _random_state(leaves: list[tuple[Any, Any, Any]], seed: int = 0) -> Any:
    """Random arrays (std 0.02) for the cut leaves, each a window of one pool of normal draws at its own offset
    (repeated where the leaf is larger): small leaves cut on the host and put on the device one by one, the large
    ones (the stacked block matrices) made by ONE device program, so no host copy of the weights is ever made.
    A program per leaf shape, or a generator per leaf, would spend most of a small run compiling."""
    import math

    import jax
    import jax.numpy as jnp
    import numpy as np

    pool = (0.02 * np.random.default_rng(seed).standard_normal(_POOL)).astype(np.float32)

    def start(i: int) -> int:
        return (i * 104729) % _POOL  # a prime stride: neighbouring leaves differ

    big = [i for i, (_, _, sd) in enumerate(leaves) if math.prod(sd.shape) > _HOST_LEAF]

    @jax.jit
    def make(pool):
        out = []
        for i in big:
            sd = leaves[i][2]
            n = math.prod(sd.shape)
            reps = -(-(start(i) + n) // _POOL)
            flat = jnp.broadcast_to(pool, (reps, _POOL)).reshape(-1)[start(i):start(i) + n]
            out.append(flat.reshape(sd.shape).astype(sd.dtype))
        return out

    values = dict(zip(big, make(jnp.asarray(pool)) if big else []))
    for i, (_, _, sd) in enumerate(leaves):
        if i not in values:
            host = np.resize(np.roll(pool, -start(i)), math.prod(sd.shape)).reshape(sd.shape)
            values[i] = jax.device_put(host.astype(sd.dtype))
    return _with_values(leaves, [values[i] for i in range(len(leaves))])


def _median_time(fn, repeats: int) -> tuple[float, float]:
    """(first call s, median of ``repeats`` further calls s); ``fn`` must block until done."""
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    times = []
    for _ in range(max(repeats, 1)):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return first, statistics.median(times)


def _one_device_mesh():
    import jax
    import numpy as np

    return jax.sharding.Mesh(np.asarray(jax.devices()[:1]), ("_",))


def _streamed(model_parts, graphdef, rest_state, group_states, chunk: int, x, t, ctx, kw, kind: str,
              repeats: int):
    """Time the staged forward with every group streamed ``chunk`` blocks at a time by the offload executor
    (:class:`vidax_core.parallel.offload.BlockPool`: the next chunk's copy issued from its transfer thread, the next
    call's first chunk under this call's last one), the copies alone and the same program with the chunks resident."""
    import jax
    from flax import nnx

    from vidax_core.parallel.host_chunks import HostChunks, chunk_shardings
    from vidax_core.parallel.offload import BlockPool
    from vidax_core.parallel.static_aux import StaticOutputs, jit_aux

    mesh = _one_device_mesh()
    pre = StaticOutputs(lambda s, x, t, c, kw: nnx.merge(graphdef, s).pre(x, t, c, **kw), key_from=1)
    post = jit_aux(lambda s, h, aux: nnx.merge(graphdef, s).post(h, aux, jax.tree.map(lambda a: a.shape, x)), 2)
    pools = []
    for name, (gdef, st) in group_states.items():
        host = HostChunks(st, chunk, chunk_shardings(st, {}, mesh), kind, direct=False)  # the accelerators' path
        pools.append(BlockPool(name, gdef, host,
                               lambda n, gd, s, h, aux: model_parts.run_block_group(n, gd, s, h, aux)))

    def call():
        h, aux = pre(rest_state, x, t, ctx, kw)
        for k, pool in enumerate(pools):
            h = pool.run(h, aux, prefetch_after=pools[k + 1] if k + 1 < len(pools) else pools[0])
        jax.block_until_ready(post(rest_state, h, aux))

    def transfer_only():
        jax.block_until_ready([p.host.put(i) for p in pools for i in range(len(p.host))])

    call()  # compiles; the executor's second run times one transfer and one compute apart (not timed here)
    _, streamed = _median_time(call, repeats)
    _, h2d = _median_time(transfer_only, repeats)
    for p in pools:
        p.release()
    dev_chunks = [(p, p.host.put(i)) for p in pools for i in range(len(p.host))]

    def compute_only():  # the same program with every chunk already on the device
        h, aux = pre(rest_state, x, t, ctx, kw)
        for p, c in dev_chunks:
            h = p._run_chunk(c, h, aux)
        jax.block_until_ready(post(rest_state, h, aux))

    _, compute = _median_time(compute_only, repeats)
    n = len(dev_chunks)
    hidden = 1.0 - max(streamed - compute, 0.0) / h2d if h2d > 0 else 1.0
    return {"chunk": chunk, "chunks": n, "host_memory": kind, "streamed_s": streamed,
            "resident_s": compute, "streamed_over_resident": streamed / compute if compute > 0 else None,
            "h2d_s_per_chunk": h2d / n, "hidden_fraction": min(max(hidden, 0.0), 1.0),
            "executor": {p.name: p.overlap for p in pools}}


@dataclasses.dataclass
class Setup:
    """One random-DiT call as the run would make it: the denoiser's build, its latent grid, the stacked groups
    (cut to ``kept`` blocks), the abstract state's cut leaves and the inputs as ``(shape, dtype)`` pairs."""

    spec: Any
    build: Any
    grid: tuple[int, int, int]
    batch: int
    text: int
    groups: dict[str, int]
    kept: dict[str, int]
    graphdef: Any
    leaves: list
    inputs: tuple[Any, Any, dict]
    activation_bytes: int = 0  # the dry run's estimate of one block's live intermediates (placement.activations)


@contextlib.contextmanager
def published_checkpoint(model_id: str, plugins: Any) -> Iterator[str]:
    """A temporary folder holding ``model_id``'s published layout with its data left as holes (configs, headers
    and tokenizers: what a config-only read needs), removed afterwards."""
    from vidax_core.bench.random_checkpoint import write_random_checkpoint

    folder = tempfile.mkdtemp(prefix="vidax-published-")
    try:
        write_random_checkpoint(model_id, folder, fill="zeros", full_text_encoder=True, log=lambda _m: None,
                                plugins=plugins)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def setup(args: argparse.Namespace, plugins: Any = None) -> Setup:
    """The random-DiT call of ``args`` (config, overrides, batch, blocks, ``published``)."""
    from flax import nnx

    from vidax_core import config as config_mod
    from vidax_core.io.run_checkpoint import checkpoint_for_run
    from vidax_core.plugins import get_plugins
    from vidax_core.runner import windowed
    from vidax_core.placement.activations import estimate
    from vidax_core.runner.denoiser import build_dit
    from vidax_core.runner.plan import video_tokens

    plugins = plugins or get_plugins()
    overrides = list(args.overrides or []) + ["image=null", "video=null"]  # the DiT's inputs are example_inputs
    cfg = config_mod.resolve(args.config, overrides, plugins.preset_for)
    with contextlib.ExitStack() as stack:
        if getattr(args, "published", False):
            folder = stack.enter_context(published_checkpoint(cfg.model.id, plugins))
            cfg = config_mod.resolve(args.config, overrides + [f"model.checkpoint={folder}"], plugins.preset_for)
        spec = plugins.registry.get(cfg.model.id)
        ckpt = checkpoint_for_run(cfg, spec, plugins, configs_only=True)
        build = build_dit(spec, ckpt, cfg, plugins)[0]
        grid = plugins.call("vae_latent_shape", spec, ckpt=ckpt, run=cfg)
        windows, _frames, _cache = windowed.plan(spec, ckpt, cfg, plugins)
        if windows is not None:  # a chunked model's call denoises one window
            grid = windowed.grids(windows)[0]
        if grid is None:
            raise UserError(f"--random-dit: the plugin of {spec.id} gives no latent grid without its VAE weights")
        grid = tuple(int(v) for v in grid)
        batch, text = int(args.batch), int(cfg.sampling.max_sequence_length or 512)
        inputs = _example_inputs(build, batch, grid, text)  # may read the checkpoint's configs
    groups = dict(build.block_counts or {})
    blocks = check_random_blocks(args.random_blocks, groups, spec.id)
    graphdef, abstract = nnx.split(nnx.eval_shape(build.ctor))
    tokens = video_tokens(build, grid)
    activation = estimate(build, abstract, batch=batch, tokens=tokens, text_tokens=text)[1] if tokens else 0
    return Setup(spec=spec, build=build, grid=grid, batch=batch, text=text, groups=groups,
                 kept={g: min(blocks or n, n) for g, n in groups.items()}, graphdef=graphdef,
                 leaves=_cut_state(abstract, groups, blocks), inputs=inputs, activation_bytes=activation)


def _call(graphdef):
    from flax import nnx

    return lambda s, x, t, c, kw: nnx.merge(graphdef, s)(x, t, c, **kw)


def trace(args: argparse.Namespace, plugins: Any = None, st: Any = None) -> Any:
    """The output shapes of the random-DiT call of ``args``, traced abstractly (``jax.eval_shape``: nothing is
    allocated or compiled), with the run's attention backend (``--attention``'s first); ``st``: the
    :func:`setup` of ``args`` when the caller has it already."""
    import jax
    import jax.numpy as jnp

    from vidax_core import attention

    st = st if st is not None else setup(args, plugins)
    state = _with_values(st.leaves, [sd for _, _, sd in st.leaves])
    x, ctx, kw = (_map_pairs(lambda sd: jax.ShapeDtypeStruct(sd[0], jnp.dtype(sd[1])), v) for v in st.inputs)
    t = jax.ShapeDtypeStruct((st.batch,), jnp.float32)
    with attention.use_backend(args.attention.split(",")[0].strip() or "auto"):
        return jax.eval_shape(_call(st.graphdef), state, x, t, ctx, kw)


def bench(args: argparse.Namespace) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from flax import nnx

    from vidax_core import attention
    from vidax_core.attention.sparsity import densities
    from vidax_core.bench.report import device_memory
    from vidax_core.flops import step_flops
    from vidax_core.parallel.host_chunks import host_memory_kind
    from vidax_core.report import throughput

    st = setup(args)
    build, grid, batch, text, groups = st.build, st.grid, st.batch, st.text, st.groups
    graphdef = st.graphdef
    state = _random_state(st.leaves)
    rng = np.random.default_rng(0)
    x, ctx, kw = (_draw(v, rng) for v in st.inputs)
    t = jnp.full((batch,), 500.0, jnp.float32)
    flops = step_flops(build, [tuple(range(batch))], grid, text, blocks=st.kept)
    peak = throughput.local_peak()
    rows = []
    for name in [b.strip() for b in args.attention.split(",") if b.strip()]:
        row: dict[str, Any] = {"attention": name}
        try:
            with attention.use_backend(name):
                fn = jax.jit(_call(graphdef))
                t0 = time.perf_counter()
                compiled = fn.lower(state, x, t, ctx, kw).compile()
                row["compile_s"] = time.perf_counter() - t0
                row["temp_bytes"] = _temp_bytes(compiled)
                _, row["call_s"] = _median_time(lambda: jax.block_until_ready(compiled(state, x, t, ctx, kw)),
                                                args.repeats)
                jax.effects_barrier()  # sparse attention's measured densities have arrived
                row["attention_calls"] = attention.calls()
                sparse = densities(row["attention_calls"])
                computed = step_flops(build, [tuple(range(batch))], grid, text, blocks=st.kept, sparse=sparse)
                row.update(throughput.utilisation(computed, row["call_s"], 1, build.param_dtype, peak,
                                                  flops if sparse else None, sparse))
                row["device_peak_bytes"] = device_memory()["device_peak_bytes"]  # the process's so far
                for chunk in [int(c) for c in str(args.offload or "").split(",") if c.strip()]:
                    rest, group_states = _split_groups(graphdef, state, groups)
                    row.setdefault("offload", []).append(
                        _streamed(nnx.merge(graphdef, state), graphdef, rest, group_states, chunk, x, t, ctx, kw,
                                  host_memory_kind(_one_device_mesh()), args.repeats))
        except Exception as exc:  # noqa: BLE001 - a backend that cannot run here (e.g. out of memory) is a result
            row["error"] = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        rows.append(row)
        jax.clear_caches()
    return {"model": st.spec.id, "grid": list(grid), "batch": batch, "text_tokens": text,
            "video_tokens": None if not build.patch_size else int(np.prod(grid) // np.prod(build.patch_size)),
            "blocks": st.kept, "activation_estimate_bytes": st.activation_bytes,
            "dtype": np.dtype(build.param_dtype).name, "backend": jax.default_backend(),
            "device": getattr(jax.devices()[0], "device_kind", ""), "peak": peak.name if peak else None,
            "flops_per_call": flops, "rows": rows}


def _temp_bytes(compiled: Any) -> int | None:
    """XLA's temporary bytes of a compiled program (its live intermediates), None where the backend does not say."""
    try:
        return int(compiled.memory_analysis().temp_size_in_bytes)
    except Exception:  # noqa: BLE001 - a backend without memory analysis
        return None


def _split_groups(graphdef, state, groups):
    """(state without the stacked groups, {group: (graphdef of one block, stacked state)})."""
    from flax import nnx

    model = nnx.merge(graphdef, state)
    out = {}
    for g in groups:
        gdef, st = nnx.split(getattr(model, g))
        out[g] = (gdef, st)
    return nnx.split(model)[1], out


def markdown(rep: dict[str, Any]) -> str:
    from vidax_core.flops import human

    blocks = ", ".join(f"{g} {n}" for g, n in rep["blocks"].items())
    lines = [f"random {rep['model']} DiT (blocks: {blocks}), {rep['dtype']}, batch {rep['batch']}, latent grid "
             f"{'x'.join(map(str, rep['grid']))} ({rep['video_tokens']} video + {rep['text_tokens']} text tokens) "
             f"on {rep['backend']} {rep['device']}; {human(rep['flops_per_call'] or 0)} per call", "",
             "| attention | compile s | call s | TFLOP/s | MFU | offload chunk: streamed s, "
             "same program resident s, h2d s/chunk, hidden |",
             "|---|---|---|---|---|---|"]
    for r in rep["rows"]:
        if "error" in r:
            lines.append(f"| {r['attention']} | error: {r['error']} | | | | |")
            continue
        off = "; ".join(f"{o['chunk']}: {o['streamed_s']:.3f}, {o['resident_s']:.3f}, {o['h2d_s_per_chunk']:.4f}, "
                        f"{o['hidden_fraction']:.0%} ({o['host_memory']})"
                        for o in r.get("offload", [])) or "-"
        rate = r.get("achieved_flops_per_s")
        mfu = r.get("mfu")
        mfu_s = f"{mfu:.1%}" if mfu is not None else "n/a"
        if r.get("sparse_speedup"):  # sparse attention: MFU of the work computed, and the dense equivalent
            mfu_s += (f" (sparse: {r['sparse_speedup']:.2f}x less work than dense; dense-equivalent "
                      f"{r['dense_equivalent_mfu']:.1%})" if r.get("dense_equivalent_mfu") is not None else "")
        lines.append(f"| {r['attention']} | {r['compile_s']:.2f} | {r['call_s']:.4f} | "
                     f"{rate / 1e12 if rate else 0:.3g} | {mfu_s} | {off} |")
    return "\n".join(lines) + "\n"


def main(args: argparse.Namespace) -> int:
    from vidax_core.bench.report import machine_info, write_report

    rep = bench(args)
    rep["machine"] = machine_info()
    rep["markdown"] = markdown(rep)
    write_report(rep, args.out, args.name or "random_dit")
    if not getattr(args, "quiet", False):
        print(rep["markdown"], end="")
    return 0
