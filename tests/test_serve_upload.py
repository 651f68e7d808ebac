"""``input_reference`` on a real image-to-video pipe (the built-in tiny Cosmos-Predict2.5, which takes text or an
image): the upload is kept inside the output folder under the job's id, reaches the pipe as ``image=`` (the video
equals a direct call with that image, and differs from the same seed without it), and goes away with its job."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from serve_stub import form, png, post_json, request, wait_done
from vidax_core.io.video import read_mp4
from vidax_core.serve import Server


# read_mp4 starts ffmpeg: a fork followed at once by an exec, which JAX's fork warning does not concern
@pytest.mark.filterwarnings(r"ignore:os\.fork\(\) was called:RuntimeWarning")
def test_upload_conditions_the_video(tmp_path):
    import vidax

    out = tmp_path / "out"
    with vidax.load("configs/cosmos_demo.yaml", "sampling.num_steps=2", "sampling.height=32", "sampling.width=32",
                    "sampling.num_frames=5", "sampling.max_sequence_length=16") as pipe:
        with Server(pipe, port=0, output_dir=str(out), quiet=True) as srv:
            body, ctype = form({"prompt": "a robot", "seed": "4"},
                               {"input_reference": ("../../../first.png", png(), "image/png")})
            status, _, reply = request(srv.url, "POST", "/v1/videos", body, {"Content-Type": ctype})
            assert status == 200, reply
            with_image = json.loads(reply)["id"]
            assert os.path.isfile(out / f"{with_image}.input.png")
            status, plain = post_json(srv.url, {"prompt": "a robot", "seed": 4})
            assert status == 200, plain
            for job_id in (with_image, plain["id"]):
                assert wait_done(srv.url, job_id, timeout=300)["status"] == "completed"
            a = read_mp4(str(out / f"{with_image}.mp4")).astype(np.int16)
            b = read_mp4(str(out / f"{plain['id']}.mp4")).astype(np.int16)
            assert a.shape == b.shape == (5, 32, 32, 3)
            assert np.abs(a - b).max() > 0  # the image changed the video
            assert request(srv.url, "DELETE", f"/v1/videos/{with_image}")[0] == 200
            assert sorted(os.listdir(out)) == [f"{plain['id']}.mp4"]
        assert sorted(os.listdir(tmp_path)) == ["out"]
        (tmp_path / "direct.png").write_bytes(png())
        pipe(prompt="a robot", seed=4, image=str(tmp_path / "direct.png")).save(str(tmp_path / "direct.mp4"))
    direct = read_mp4(str(tmp_path / "direct.mp4")).astype(np.int16)
    assert np.array_equal(a, direct)
