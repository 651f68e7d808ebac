"""Conditioning-image loading / resizing (vidax_core.io.image) against diffusers' load_image and VideoProcessor.preprocess."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from vidax_core.errors import UserError
from vidax_core.io.image import fit_size, load_image, preprocess_image


@pytest.fixture()
def photo(tmp_path):
    rng = np.random.default_rng(0)
    arr = rng.integers(0, 256, (45, 70, 3), dtype=np.uint8)
    Image.fromarray(arr).save(tmp_path / "a.png")
    Image.fromarray(arr).save(tmp_path / "a.jpg", quality=90)
    Image.fromarray(np.dstack([arr, arr[..., :1]]), "RGBA").save(tmp_path / "rgba.png")
    return tmp_path


def test_load_matches_diffusers(photo):
    from diffusers.utils import load_image as ref_load

    for name in ("a.png", "a.jpg", "rgba.png"):
        got, ref = load_image(photo / name), ref_load(str(photo / name))
        assert got.mode == "RGB" and got.size == (70, 45)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(ref))


def test_missing_or_unreadable_is_one_line_user_error(photo):
    (photo / "junk.png").write_bytes(b"not an image")
    for name in ("nope.png", "junk.png"):
        with pytest.raises(UserError) as err:
            load_image(photo / name)
        assert "\n" not in str(err.value) and name in str(err.value)
    with pytest.raises(UserError):
        load_image(photo)  # a folder


@pytest.mark.parametrize("size,scale", [((48, 64), 8), ((45, 70), 8), ((64, 32), 8), ((45, 70), 16)])
def test_preprocess_matches_video_processor(photo, size, scale):
    torch = pytest.importorskip("torch")
    from diffusers.video_processor import VideoProcessor

    img = load_image(photo / "a.jpg")
    height, width = size
    with torch.no_grad():
        expected = VideoProcessor(vae_scale_factor=scale).preprocess(img, height=height, width=width).numpy()
    got = preprocess_image(img, height, width, scale)
    assert got.shape == expected.shape == (1, 3, height // scale * scale, width // scale * scale)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)


def test_fit_size_is_the_reference_recipe(photo):
    img = load_image(photo / "a.png")  # 70 x 45
    h, w = fit_size(img, 480 * 832, 16)
    aspect = 45 / 70
    assert (h, w) == (round(np.sqrt(480 * 832 * aspect)) // 16 * 16, round(np.sqrt(480 * 832 / aspect)) // 16 * 16)
    assert h % 16 == 0 and w % 16 == 0 and h * w <= 480 * 832
