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
