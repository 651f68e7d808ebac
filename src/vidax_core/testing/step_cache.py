"""Recording what diffusers' cache hooks decide (FirstBlockCache, MagCache), for the step-cache parity tests."""

from __future__ import annotations


class Recorder:
    """Which (context, step) pairs diffusers' cache hooks skipped, and MagCache's calibration ratios."""

    def __init__(self, monkeypatch) -> None:
        from diffusers.hooks import first_block_cache as fbc, mag_cache as mag

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
