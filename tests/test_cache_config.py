"""The ``cache:`` run key: diffusers' field names and defaults, and one-line refusals for what cannot be right."""

from __future__ import annotations

import pytest

from vidax_core.cache.layout import CacheLayout
from vidax_core.cache.plan import make_plan
from vidax_core.config.cache import FirstBlockCache, MagCache, as_dict, parse_cache
from vidax_core.errors import UserError


def test_defaults_are_diffusers():
    from diffusers.hooks import FirstBlockCacheConfig, MagCacheConfig

    ref = MagCacheConfig.__dataclass_fields__
    mine = parse_cache({"method": "mag"})
    for name in ("threshold", "max_skip_steps", "retention_ratio", "calibrate", "mag_ratios"):
        assert getattr(mine, name) == ref[name].default, name
    assert parse_cache({"method": "first_block"}).threshold == FirstBlockCacheConfig().threshold
    assert {f for f in MagCache.__dataclass_fields__} == set(ref)
    assert {f for f in FirstBlockCache.__dataclass_fields__} == set(FirstBlockCacheConfig.__dataclass_fields__)
    assert as_dict(parse_cache("first_block")) == {"method": "first_block", "threshold": 0.05}
    assert parse_cache(None) is None


@pytest.mark.parametrize("value, message", [
    ({"method": "fist_block"}, "did you mean first_block"),
    ({"method": "mag", "treshold": 0.1}, "did you mean cache.threshold"),
    ({"method": "first_block", "max_skip_steps": 2}, "unknown config key cache.max_skip_steps"),
    ({"method": "mag", "threshold": -1}, "cache.threshold must be >= 0"),
    ({"method": "mag", "retention_ratio": 2}, "between 0.0 and 1.0"),
    ({"method": "mag", "num_inference_steps": 28}, "drop cache.num_inference_steps"),
    ({"method": "mag", "calibrate": True, "mag_ratios": [1.0]}, "drop cache.mag_ratios"),
    ({"method": "mag", "mag_ratios": [1.0, -1.0]}, "positive"),
    ({"method": "teacache", "use_ret_steps": "yes"}, "true/false"),
    (3, "must be null or"),
])
def test_bad_cache_keys_are_one_line_errors(value, message):
    with pytest.raises(UserError) as err:
        parse_cache(value, num_steps=8)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_missing_tables_are_refused():
    batches = (("cond", "uncond"),)
    with pytest.raises(UserError, match="calibrate=true"):
        make_plan({"method": "mag"}, "ltx-video-13b-0.9.8-dev", CacheLayout(), batches, [list(range(8))], 8)
    with pytest.raises(UserError, match="give cache.coefficients"):
        make_plan({"method": "teacache"}, "ltx-video-13b-0.9.8-dev", CacheLayout(), batches, [list(range(8))], 8,
                  signal=lambda _ret: [0.0] * 8)
    with pytest.raises(UserError, match="has no such mode"):  # TeaCache4CogVideoX1.5 has no retention steps
        make_plan({"method": "teacache", "use_ret_steps": True}, "cogvideox-5b", CacheLayout(), batches,
                  [list(range(8))], 8, signal=lambda _ret: [0.0] * 8)
    with pytest.raises(UserError, match="does not give"):  # no signal of either kind
        make_plan({"method": "teacache", "coefficients": [1.0, 0.0]}, "x", CacheLayout(), batches,
                  [list(range(8))], 8)
    plan = make_plan({"method": "mag"}, "wan2.1-t2v-1.3b", CacheLayout(), batches, [list(range(50))], 50)
    table = plan.schedule[0]
    assert table.shape == (50, 2) and not table.all() and table[:10].all()  # retention: the first 10 of 50 run


def test_teacache_published_modes():
    """``use_ret_steps: null`` takes the model's published mode and its polynomial from the shipped table."""
    from vidax_core.cache import tables
    from vidax_core.config.cache import TeaCache
    from vidax_core.cache.plan import teacache_coefficients, teacache_mode

    for model, mode in (("wan2.1-t2v-1.3b", True), ("cogvideox1.5-5b", False), ("cogvideox-5b-i2v", False)):
        assert teacache_mode(TeaCache(), model) is mode
        assert teacache_coefficients(TeaCache(), model, mode) == tables.TEACACHE_COEFFICIENTS[model][mode]
    assert teacache_mode(TeaCache(use_ret_steps=False), "wan2.1-t2v-1.3b") is False
    # the values of TeaCache4CogVideoX1.5's coefficients_dict, spot-checked
    assert tables.TEACACHE_COEFFICIENTS["cogvideox1.5-5b"][False][0] == 2.50210439e+02
    assert tables.TEACACHE_COEFFICIENTS["cogvideox-2b"][False][-1] == -3.61568434e-03
    assert tables.TEACACHE_COEFFICIENTS["ltx-video-0.9.1"][False][0] == 2.14700694e+01
    # a data-dependent signal (LTX): the reference's one mode, its polynomial, decided on the device
    plan = make_plan({"method": "teacache", "coefficients": [1.0, 0.0], "threshold": 0.5}, "ltx-video-13b-0.9.8-dev",
                     CacheLayout(contexts="call"), (("uncond", "cond"),), [list(range(6))], 6, device_signal=True)
    assert (plan.kind, plan.coefficients, plan.num_steps, plan.schedule) == ("teacache", (1.0, 0.0), 6, ())
    with pytest.raises(UserError, match="no retention steps"):
        make_plan({"method": "teacache", "use_ret_steps": True, "coefficients": [1.0]}, "ltx-video-13b-0.9.8-dev",
                  CacheLayout(), (("cond",),), [list(range(6))], 6, device_signal=True)


def test_run_config_takes_the_key():
    from vidax_core import config as config_mod
    from vidax_core.plugins import get_plugins

    cfg = config_mod.resolve(None, ["model.id=wan2.1-t2v-1.3b", "cache.method=mag", "cache.threshold=0.1"],
                             get_plugins().preset_for)
    assert cfg.cache["method"] == "mag" and cfg.cache["threshold"] == 0.1 and cfg.cache["max_skip_steps"] == 3
    with pytest.raises(UserError, match="did you mean"):
        config_mod.resolve(None, ["model.id=wan2.1-t2v-1.3b", "cache.method=fist_block"], get_plugins().preset_for)
