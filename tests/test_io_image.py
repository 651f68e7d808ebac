"""Conditioning-image loading / resizing (vidax_core.io.image)
against diffusers' load_image and VideoProcessor.preprocess."""

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


@pytest.mark.parametrize("size,scale,resample", [((48, 64), 8, "lanczos"), ((45, 70), 8, "lanczos"),
                                                 ((64, 32), 8, "lanczos"), ((45, 70), 16, "lanczos"),
                                                 ((64, 96), 32, "bilinear")])
def test_preprocess_matches_video_processor(photo, size, scale, resample):
    """The default processor (lanczos) and LTX2ImageToVideoPipeline's (bilinear)."""
    torch = pytest.importorskip("torch")
    from diffusers.video_processor import VideoProcessor

    img = load_image(photo / "a.jpg")
    height, width = size
    with torch.no_grad():
        expected = VideoProcessor(vae_scale_factor=scale, resample=resample).preprocess(
            img, height=height, width=width).numpy()
    got = preprocess_image(img, height, width, scale, resample=resample)
    assert got.shape == expected.shape == (1, 3, height // scale * scale, width // scale * scale)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)


def test_fit_size_is_the_reference_recipe(photo):
    img = load_image(photo / "a.png")  # 70 x 45
    h, w = fit_size(img, 480 * 832, 16)
    aspect = 45 / 70
    assert (h, w) == (round(np.sqrt(480 * 832 * aspect)) // 16 * 16, round(np.sqrt(480 * 832 / aspect)) // 16 * 16)
    assert h % 16 == 0 and w % 16 == 0 and h * w <= 480 * 832


def test_h264_roundtrip_compresses_one_frame(tmp_path):
    """LTX-2's image conditioning: CRF 0 returns the image itself; otherwise the even-cropped image comes back
    through one H.264 frame, close to the input on a smooth image and closer at a lower CRF."""
    from PIL import Image

    from vidax_core.io.image import h264_roundtrip

    y, x = np.mgrid[0:41, 0:57]
    rgb = np.stack([x * 4, y * 6, (x + y) * 2], -1).clip(0, 255).astype(np.uint8)
    image = Image.fromarray(rgb)
    assert h264_roundtrip(image, 0) is image
    errs = []
    for crf in (10, 40):
        out = np.asarray(h264_roundtrip(image, crf))
        assert out.shape == (40, 56, 3) and out.dtype == np.uint8
        errs.append(np.abs(out.astype(int) - rgb[:40, :56].astype(int)).mean())
    assert errs[0] < errs[1] < 20, errs


def test_h264_roundtrip_is_the_reference_pyav_path():
    """The frame LTX-2's image conditioning sees equals diffusers' ``apply_image_conditioning_crf`` (PyAV) pixel for
    pixel at both generations' default CRFs (ffmpeg's default bicubic colour conversion instead moves about two
    thirds of the pixels, by up to 22 levels at CRF 18)."""
    from diffusers.pipelines.ltx2.utils import apply_image_conditioning_crf

    from vidax_core.io.image import h264_roundtrip

    y, x = np.mgrid[0:48, 0:66]
    rgb = np.stack([(np.sin(x / 7) + 1) * 120, (np.cos(y / 5) + 1) * 110, (x + y) % 64 * 4], -1).astype(np.uint8)
    rgb[10:20, 15:35] = (250, 10, 10)
    for crf in (18, 33):
        want = apply_image_conditioning_crf(rgb, crf)
        got = np.asarray(h264_roundtrip(Image.fromarray(rgb), crf))
        assert np.abs(want.astype(int) - rgb).mean() > 1  # the compression really changed the image
        np.testing.assert_array_equal(got, want)
