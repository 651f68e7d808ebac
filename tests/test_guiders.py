"""A checkpoint's diffusers guider read as a vidax guidance strategy (vidax_core.guiders) against diffusers' own
guiders, step by step as a pipeline drives them (``set_state`` -> ``prepare_inputs`` -> the predictions ->
``__call__``), over six steps of random predictions shaped (1, C, F, H, W).

Adaptive projected guidance with its momentum carried across steps, a norm threshold, per-frame norms
(``norm_dim`` [-1, -2, -4]), the original formulation, ``eta`` and guidance rescale; a guidance window (``stop``);
classifier-free guidance with a window and rescale; a disabled guider. Dropping the carried momentum, or norming over
every axis, moves APG far past the bound. Bad guider files are one-phrase errors."""

from __future__ import annotations

import numpy as np
import pytest

from vidax_core.guidance import AdaptiveProjected, ClassifierFree, NoGuidance, WindowedClassifierFree
from vidax_core.guiders import guidance_from_guider, read_guider

torch = pytest.importorskip("torch")
guiders = pytest.importorskip("diffusers.guiders")

STEPS, SHAPE = 6, (1, 4, 3, 5, 6)
APG_MOTIF = dict(guidance_scale=8.0, adaptive_projected_guidance_rescale=12.0, adaptive_projected_guidance_momentum=0.1,
                 use_original_formulation=True, adaptive_projected_guidance_norm_dim=[-1, -2, -4])
CASES = {
    "apg_defaults": ("AdaptiveProjectedGuidance", {}),
    "apg_motif": ("AdaptiveProjectedGuidance", APG_MOTIF),
    "apg_eta_rescale_window": ("AdaptiveProjectedGuidance", dict(APG_MOTIF, use_original_formulation=False, eta=0.5,
                                                                 guidance_rescale=0.3, stop=0.6,
                                                                 adaptive_projected_guidance_rescale=0.5)),
    "cfg_window_rescale": ("ClassifierFreeGuidance", dict(guidance_scale=4.0, guidance_rescale=0.5, stop=0.7)),
    "cfg_original": ("ClassifierFreeGuidance", dict(guidance_scale=3.0, use_original_formulation=True)),
}


def _preds():
    rng = np.random.default_rng(0)
    return [(rng.standard_normal(SHAPE).astype(np.float32), rng.standard_normal(SHAPE).astype(np.float32))
            for _ in range(STEPS)]


def _reference(cls: str, kwargs: dict, preds) -> tuple[list[np.ndarray], dict]:
    guider = getattr(guiders, cls)(**kwargs)
    out = []
    for i, (c, u) in enumerate(preds):
        guider.set_state(step=i, num_inference_steps=STEPS, timestep=torch.tensor(1000.0 - i))
        batches = guider.prepare_inputs({"encoder_hidden_states": (torch.zeros(1), torch.ones(1))})
        for b in batches:
            b.noise_pred = torch.from_numpy(c if b.__guidance_identifier__ == "pred_cond" else u)
        out.append(guider(batches)[0].numpy())
    return out, {"_class_name": cls, **dict(guider.config)}


def _vidax(guide, preds, *, carry: bool = True) -> list[np.ndarray]:
    scales = guide.scales(np.linspace(1000.0, 100.0, STEPS))
    state = guide.init_state(preds[0][0])
    out = []
    for i, (c, u) in enumerate(preds):
        s_i = {k: v[i] for k, v in scales.items()}
        g, new = guide.combine_state({"cond": c, "uncond": u}, s_i, None, None, state)
        state = new if carry else guide.init_state(c)
        out.append(np.asarray(g))
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_guider_matches_diffusers(case):
    cls, kwargs = CASES[case]
    preds = _preds()
    want, config = _reference(cls, kwargs, preds)
    guide = guidance_from_guider(config, scale=None, num_steps=STEPS)
    kind = {"apg": AdaptiveProjected, "cfg_window": WindowedClassifierFree, "cfg_original": ClassifierFree}
    assert isinstance(guide, next(v for k, v in kind.items() if case.startswith(k)))
    got = _vidax(guide, preds)
    err = max(float(np.abs(g - w).max() / np.abs(w).max()) for g, w in zip(got, want))
    print(f"{case}: max rel err over {STEPS} steps {err:.2e}")
    assert err < 2e-6


def test_what_apg_depends_on():
    _, kwargs = CASES["apg_motif"]
    preds = _preds()
    want, config = _reference("AdaptiveProjectedGuidance", kwargs, preds)
    guide = guidance_from_guider(config, scale=None, num_steps=STEPS)
    import dataclasses

    wrong = {"momentum not carried": _vidax(guide, preds, carry=False),
             "norms over every axis": _vidax(dataclasses.replace(guide, norm_dims=None), preds)}
    for label, got in wrong.items():
        err = max(float(np.abs(g - w).max() / np.abs(w).max()) for g, w in zip(got, want))
        print(f"{label}: max rel err {err:.2e}")
        assert err > 1e-2, label


def test_scale_override_disabled_and_bad_files():
    config = {"_class_name": "AdaptiveProjectedGuidance", **APG_MOTIF}
    assert guidance_from_guider(config, scale=5.0, num_steps=STEPS).scale == 5.0
    assert guidance_from_guider(None, scale=None, num_steps=STEPS) == ClassifierFree(scale=7.5)  # no guider folder
    for off in (dict(config, enabled=False), dict(config, guidance_scale=0.0), dict(config, stop=0.1)):
        assert isinstance(guidance_from_guider(off, scale=None, num_steps=STEPS), NoGuidance)
    assert isinstance(guidance_from_guider({"guidance_scale": 1.0}, scale=None, num_steps=STEPS), NoGuidance)
    for bad, phrase in ((dict(_class_name="SkipLayerGuidance"), "is not supported"),
                        (dict(guidance_scale="high"), "must be a finite number"),
                        (dict(start=0.5, stop=0.2), "start <= stop"),
                        (dict(_class_name="AdaptiveProjectedGuidance", adaptive_projected_guidance_norm_dim=[1.5]),
                         "list of integers")):
        with pytest.raises(ValueError, match=phrase):
            read_guider(bad)
