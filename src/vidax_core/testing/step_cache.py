"""Recording what diffusers' cache hooks decide (FirstBlockCache, MagCache), for the step-cache parity tests."""

from __future__ import annotations


class Recorder:
    """Which (context, step) pairs diffusers' cache hooks skipped, and MagCache's calibration ratios."""

    def __init__(self, monkeypatch) -> None:
        from diffusers.hooks import first_block_cache as fbc
        from diffusers.hooks import mag_cache as mag

        self.calls: list[tuple[str, bool]] = []
        self.diffs: list[tuple[str, float | None]] = []  # FirstBlockCache's statistic, to place a threshold
        self.ratios: dict[str, list[float]] = {}
        should = fbc.FBCHeadBlockHook._should_compute_remaining_blocks

        def fbc_decide(hook, residual):
            prev = hook.state_manager.get_state().head_block_residual
            self.diffs.append((hook.state_manager._context.name, None if prev is None else
                               float((residual - prev).abs().mean() / prev.abs().mean())))
            out = should(hook, residual)
            self.calls.append((hook.state_manager._context.name, out))
            return out

        head = mag.MagCacheHeadHook.new_forward

        def mag_forward(hook, module, *args, **kwargs):
            out = head(hook, module, *args, **kwargs)
            self.calls.append((hook.state_manager._context.name, hook.state_manager.get_state().should_compute))
            return out

        calibrate = mag.MagCacheBlockHook._perform_calibration_step

        def mag_calibrate(hook, state, residual):
            calibrate(hook, state, residual)
            self.ratios.setdefault(hook.state_manager._context.name, []).append(state.calibration_ratios[-1])

        monkeypatch.setattr(fbc.FBCHeadBlockHook, "_should_compute_remaining_blocks", fbc_decide)
        monkeypatch.setattr(mag.MagCacheHeadHook, "new_forward", mag_forward)
        monkeypatch.setattr(mag.MagCacheBlockHook, "_perform_calibration_step", mag_calibrate)

    def skipped(self, name: str) -> list[int]:
        return [k for k, (_, c) in enumerate([x for x in self.calls if x[0] == name]) if not c]

    def run(self, transformers, config, call):
        """``call()`` with ``config`` (None: uncached) enabled on each of ``transformers`` and this recorder's
        decisions cleared first; the cache is disabled again afterwards. Returns what ``call`` returns."""
        self.calls.clear()
        self.diffs.clear()
        if config is not None:
            for t in transformers:
                t.enable_cache(config)
        try:
            return call()
        finally:
            if config is not None:
                for t in transformers:
                    t.disable_cache()


def check_against_diffusers(rec: Recorder, reference, pipe, *, steps: int, fbc_threshold: float, mag_ratios,
                            tol: float = 1e-4) -> dict:
    """FirstBlockCache and MagCache, in diffusers (``reference(config) -> (latents, skipped steps)``, recorded by
    ``rec``; None = uncached) and in the loaded vidax ``pipe``: the same steps skipped, latents within ``tol``
    relative, and each cached reference more than ``10 * tol`` from the uncached one (so the check can fail). The
    thresholds must put no step on a knife edge and skip some but not all steps. Returns ``{method: (vidax
    output, skipped steps)}`` for the family's own assertions."""
    from diffusers.hooks import FirstBlockCacheConfig, MagCacheConfig

    from vidax_core.testing.parity import rel_l2

    plain, _ = reference(None)
    fbc_ref, fbc_skips = reference(FirstBlockCacheConfig(threshold=fbc_threshold))
    diffs = list(rec.diffs)
    mag_ref, mag_skips = reference(MagCacheConfig(threshold=0.06, max_skip_steps=3, retention_ratio=0.2,
                                                  num_inference_steps=steps, mag_ratios=mag_ratios))
    assert fbc_skips and len(fbc_skips) < steps - 1, diffs
    assert all(abs(d - fbc_threshold) > 2e-3 for _, d in diffs if d is not None), diffs  # no knife-edge step
    assert mag_skips
    cases = {"first_block": (pipe(cache={"method": "first_block", "threshold": fbc_threshold}), fbc_ref, fbc_skips),
             "mag": (pipe(cache={"method": "mag", "mag_ratios": list(mag_ratios)}), mag_ref, mag_skips)}
    for name, (out, ref, skips) in cases.items():
        err, moved = rel_l2(out.latents, ref), rel_l2(ref, plain)
        assert err < tol, (name, err)
        assert moved > 10 * tol, (name, moved)
        assert out.metrics["cache"]["skipped_steps"] == skips, (name, out.metrics["cache"])
    return {name: (out, skips) for name, (out, _, skips) in cases.items()}


def teacache_hook(monkeypatch, steps: int, coefficients, threshold: float, modulated, record: list):
    """Makes diffusers' MagCache head-block hook decide by TeaCache's rule for a data-dependent signal
    (TeaCache4LTX-Video's and 4HunyuanVideo's ``teacache_forward``), per cache context: ``modulated(module,
    hidden, temb)`` (the head block's modulated input, by the reference's formula) in float64, its relative L1
    change since the context's last call rescaled by ``np.poly1d(coefficients)`` and accumulated until it reaches
    ``threshold``; the first and last calls compute. A skipped call returns the head input plus the last computed
    stack residual (diffusers' tail hooks then pass the rest through), as the reference does. ``record`` gets
    ``(context, computed, distance)`` per call. Returns the MagCacheConfig to enable."""
    import numpy as np
    from diffusers.hooks import mag_cache as mag

    poly = np.poly1d(coefficients)
    memo: dict[str, dict] = {}

    def forward(hook, module, *args, **kwargs):
        md = hook._metadata
        hidden = md._get_parameter_from_args_kwargs("hidden_states", args, kwargs)
        temb = md._get_parameter_from_args_kwargs("temb", args, kwargs)
        name = hook.state_manager._context.name
        state = hook.state_manager.get_state()
        state.head_block_input = hidden
        mine = memo.setdefault(name, {"acc": 0.0, "prev": None})
        m = modulated(module, hidden, temb).double()
        cnt, d = state.step_index, None
        if cnt == 0 or cnt == steps - 1:
            compute, mine["acc"] = True, 0.0
        else:
            d = float((m - mine["prev"]).abs().mean() / mine["prev"].abs().mean())
            mine["acc"] += poly(d)
            compute = not mine["acc"] < threshold
            if compute:
                mine["acc"] = 0.0
        mine["prev"] = m
        record.append((name, compute, d))
        state.should_compute = compute
        if compute:
            return hook.fn_ref.original_forward(*args, **kwargs)
        out = hidden + state.previous_residual
        if md.return_encoder_hidden_states_index is None:
            return out
        ret = [None] * (max(md.return_hidden_states_index, md.return_encoder_hidden_states_index) + 1)
        ret[md.return_hidden_states_index] = out
        ret[md.return_encoder_hidden_states_index] = md._get_parameter_from_args_kwargs(
            "encoder_hidden_states", args, kwargs)
        return tuple(ret)

    monkeypatch.setattr(mag.MagCacheHeadHook, "new_forward", forward)
    return mag.MagCacheConfig(num_inference_steps=steps, mag_ratios=[1.0] * steps)
