"""HunyuanVideo text encoders against the pipeline's ``encode_prompt`` (Llama ``hidden_states[-3]`` of the templated
prompt, cropped, with its mask; pooled CLIP-L), for right- and left-padding tokenizers, and the run checks: bad
runs are refused with one ``error:`` line naming the key, before any weight loads."""

from __future__ import annotations

import os

from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from vidax_hunyuan.plugin import HunyuanPlugin  # noqa: E402
from vidax_core.testing.cli import vidax  # noqa: E402
from vidax_core.testing.tiny.hunyuan import build_tiny_hunyuan_pipeline  # noqa: E402

plugin = HunyuanPlugin()

pytestmark = pytest.mark.xdist_group("hunyuan_plugin")

# the repository's demo config, by absolute path: the CLI runs wherever the test process stands
DEMO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "configs", "hunyuan_demo.yaml")

PROMPTS = ["a red car drives through the city streets at night", "blurry"]
MAX_LEN = 300


@pytest.mark.parametrize("side", ["right", "left"])
def test_prompt_embeddings_match_the_pipeline(tmp_path, side):
    from vidax_core.io.checkpoint import Checkpoint

    pipe = build_tiny_hunyuan_pipeline(seed=7, padding_side=side)
    pipe.save_pretrained(str(tmp_path))
    run = SimpleNamespace(model=SimpleNamespace(dtype="float32"), options={},
                          sampling=SimpleNamespace(max_sequence_length=MAX_LEN))
    spec = SimpleNamespace(id="hunyuanvideo-t2v-13b", tasks=("t2v",))
    enc = plugin.build_text_encoder(spec, Checkpoint(str(tmp_path)), run, None)
    got = plugin.encode_prompt(spec, enc, PROMPTS, run)

    def ref(dtype):
        pipe.text_encoder.to(dtype)
        pipe.text_encoder_2.to(dtype)
        with torch.no_grad():
            hidden, pooled, mask = pipe.encode_prompt(PROMPTS, device="cpu", dtype=dtype, max_sequence_length=MAX_LEN)
        pipe.text_encoder.float()
        pipe.text_encoder_2.float()
        return hidden.double().numpy(), pooled.double().numpy(), mask.numpy()

    (h64, p64, _), (h32, p32, m32) = ref(torch.float64), ref(torch.float32)
    np.testing.assert_array_equal(got["mask"], m32)
    if side == "right":  # the prompts are padded (left padding lands in the cropped prefix, as the reference's)
        assert got["mask"].sum(1).min() > 0 and (got["mask"] == 0).any()
    for name, g, w32, w64 in (("hidden", got["hidden"], h32, h64), ("pooled", got["pooled"], p32, p64)):
        ref_err = float(np.abs(w32 - w64).max())
        err = float(np.abs(g - w64).max())
        print(f"hunyuan {name} ({side} padding): max_abs={err:.3e} (reference fp32 vs fp64 {ref_err:.3e}) "
              f"shape {g.shape}")
        assert g.shape == w64.shape
        assert err <= max(8 * ref_err, 1e-6)


BAD = {
    "sampling.num_frames=16": "sampling.num_frames must be 4k+1",
    "sampling.height=40": "sampling.height must be a multiple of 16",
    "image=x.png": "takes no image",
    "options.prompt_template=no slot": "options.prompt_template must hold exactly one {}",
    "options.crop_start=-1": "options.crop_start must be >= 0",
}


def test_i2v_needs_an_image(tmp_path):
    """A run refuses before any weight; the dry run sizes the id with a placeholder image and says so."""
    proc = vidax("run", DEMO, "model.id=hunyuanvideo-i2v-13b", f"output.path={tmp_path / 'o.mp4'}")
    assert proc.returncode == 2 and "give the first frame with image=" in proc.stderr, proc.stderr


@pytest.mark.parametrize("override", sorted(BAD))
def test_bad_runs_are_refused_before_loading(tmp_path, override):
    proc = vidax("run", DEMO, override, f"output.path={tmp_path / 'o.mp4'}", "--dry-run")
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2, proc.stderr
    assert lines and lines[-1].startswith("error:") and BAD[override] in proc.stderr, proc.stderr
