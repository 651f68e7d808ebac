"""The page at ``/`` in a real headless Chromium (Debian's chromium + chromium-driver, driven by selenium): it
loads, a job runs from the form with live progress, and the ``<video>`` element plays the decodable H.264 mp4; on
an image-to-video server (SkyReels-V2 I2V's tiny built-in, loaded with no image of its own) the page uploads the
first frame, shows the decode's own progress and plays the result.

The browser is found as ``CHROMIUM`` / ``CHROMEDRIVER`` name them, else on ``PATH`` (scripts/install_browser.sh
installs Debian's as root). Where neither is there the tests are skipped, saying what to install, for a user who
is not root; as root (CI) a missing browser fails them: nothing is skipped there."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time

import pytest

from serve_stub import load_pipe, request
from vidax_core.serve import Server

CHROMIUM = (os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
            or shutil.which("google-chrome") or "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER") or shutil.which("chromedriver") or "/usr/bin/chromedriver"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    pipe = load_pipe()
    with Server(pipe, port=0, output_dir=str(tmp_path_factory.mktemp("browser") / "out"), quiet=True) as srv:
        yield srv
    pipe.close()


@pytest.fixture(scope="module")
def browser():
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(path)]
    if missing:
        need = (f"{' and '.join(missing)} missing: the browser test needs Chromium and its chromedriver "
                "(apt-get install chromium chromium-driver as root, or set CHROMIUM / CHROMEDRIVER to their paths)")
        if os.geteuid() != 0:  # a developer's machine without the browser: say so, run the rest
            pytest.skip(need)
        raise AssertionError(need + "; scripts/install_browser.sh installs them (make test runs it)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--autoplay-policy=no-user-gesture-required", "--mute-audio", "--no-first-run"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def _wait(fn, timeout: float, what: str):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = fn()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_the_writer_makes_h264_that_chromium_says_it_plays(server, browser):
    """The mp4 writer's codec (read back with ffmpeg) is H.264, and this Chromium reports it can play it."""
    import imageio_ffmpeg

    from serve_stub import post_json, wait_done

    status, job = post_json(server.url, {"prompt": "codec probe"})
    assert status == 200, job
    assert wait_done(server.url, job["id"])["status"] == "completed"
    path = os.path.join(server.app.output_dir, f"{job['id']}.mp4")
    probe = subprocess.run([imageio_ffmpeg.get_ffmpeg_exe(), "-hide_banner", "-i", path], capture_output=True,
                           text=True, timeout=60)
    stream = re.search(r"Stream .*Video: (\w+) \(([^)]*)\)", probe.stderr)
    assert stream and stream.group(1) == "h264", probe.stderr
    browser.get(server.url + "/")
    verdict = browser.execute_script(
        "return document.createElement('video').canPlayType('video/mp4; codecs=\"avc1.42E01E\"');")
    assert verdict in ("probably", "maybe"), f"this Chromium cannot play H.264 mp4 ({verdict!r})"


def test_page_runs_a_job_and_plays_it(server, browser):
    browser.get(server.url + "/")
    from selenium.webdriver.common.by import By

    prompt = browser.find_element(By.NAME, "prompt")
    for name in ("width", "height", "num_frames", "num_steps"):
        assert browser.find_element(By.NAME, name).get_attribute("value"), name
    steps = browser.find_element(By.NAME, "num_steps")
    assert int(steps.get_attribute("min")) == 1 and int(steps.get_attribute("max")) == server.app.limits.max_steps
    frames = [o.get_attribute("value") for o in browser.find_elements(By.CSS_SELECTOR, "#num_frames option")]
    assert frames and all((int(n) - 1) % 4 == 0 for n in frames)  # only frame counts the model accepts
    prompt.clear()
    prompt.send_keys("a red fox in the snow")
    browser.find_element(By.ID, "submit").click()
    job_id = _wait(lambda: browser.execute_script("return document.body.dataset.job || null;"), 60, "the job id")
    state = _wait(lambda: browser.execute_script(
        "const v = document.getElementById('video');"
        "return v.src && v.readyState >= 2 && v.duration > 0 ? "
        "{ready: v.readyState, duration: v.duration, w: v.videoWidth, h: v.videoHeight, err: v.error} : null;"),
        180, "the video element to have decoded data")
    status_text = browser.find_element(By.ID, "status").text
    assert status_text.startswith("completed"), status_text
    assert state["ready"] >= 2 and state["duration"] > 0 and state["err"] is None, state
    obj = request(server.url, "GET", f"/v1/videos/{job_id}")
    assert obj[0] == 200
    size = __import__("json").loads(obj[2])["size"]
    assert f"{state['w']}x{state['h']}" == size
    # it plays: the playhead moves
    browser.execute_script("document.getElementById('video').play();")
    _wait(lambda: browser.execute_script("return document.getElementById('video').currentTime > 0;"), 30,
          "playback to advance")


def test_page_shows_a_refusal(server, browser):
    from selenium.webdriver.common.by import By

    browser.get(server.url + "/")
    browser.execute_script("document.getElementById('width').value = 33;"
                           "document.getElementById('width').step = 'any';")
    browser.find_element(By.NAME, "prompt").send_keys("x")
    browser.find_element(By.ID, "submit").click()
    text = _wait(lambda: (browser.find_element(By.ID, "status").text or "").startswith("error") and
                 browser.find_element(By.ID, "status").text, 60, "the error line")
    assert "multiple of 16" in text


@pytest.fixture(scope="module")
def i2v_server(tmp_path_factory):
    """SkyReels-V2 I2V's tiny built-in served as ``vidax serve model.id=...`` serves an image-to-video model given
    no image: loaded with a placeholder, every request uploads its own first frame."""
    import vidax
    from vidax_core.runner.preflight import placeholder_image

    tmp = tmp_path_factory.mktemp("i2v")
    pipe = vidax.load("skyreels-v2-i2v-14b-540p", "model.checkpoint=builtin:tiny-random", "sampling.height=32",
                      "sampling.width=32", "sampling.num_frames=9", "sampling.num_steps=2",
                      f"image={placeholder_image(str(tmp), 32, 32)}", quiet=True)
    with Server(pipe, port=0, output_dir=str(tmp / "out"), quiet=True, upload_required=True) as srv:
        yield srv
    pipe.close()


def test_page_uploads_an_image_to_an_i2v_server_and_plays_the_result(i2v_server, browser, tmp_path):
    from PIL import Image
    from selenium.webdriver.common.by import By

    frame = tmp_path / "first.png"
    Image.new("RGB", (48, 32), (200, 40, 40)).save(frame)
    browser.get(i2v_server.url + "/")
    upload = browser.find_element(By.ID, "input_reference")
    assert upload.is_displayed() and upload.get_attribute("required") == "true"
    assert "image/*" in upload.get_attribute("accept")
    for name in ("negative_prompt", "guidance_scale"):
        assert browser.find_element(By.NAME, name).is_displayed(), name
    browser.find_element(By.NAME, "guidance_scale").clear()
    browser.find_element(By.NAME, "guidance_scale").send_keys("3.5")
    browser.find_element(By.NAME, "prompt").send_keys("a red square drifts")
    upload.send_keys(str(frame))
    browser.find_element(By.ID, "submit").click()
    phases = set()

    def played():
        phases.add(browser.execute_script("return document.getElementById('status').textContent.split(':')[0];"))
        return browser.execute_script(
            "const v = document.getElementById('video');"
            "return v.src && v.readyState >= 2 && v.duration > 0 ? {w: v.videoWidth, h: v.videoHeight} : null;")

    state = _wait(played, 240, "the i2v video to decode in the page")
    assert state == {"w": 32, "h": 32}, state
    assert browser.find_element(By.ID, "status").text.startswith("completed"), phases
    job_id = browser.execute_script("return document.body.dataset.job;")
    obj = json.loads(request(i2v_server.url, "GET", f"/v1/videos/{job_id}")[2])
    assert obj["status"] == "completed" and obj["phase"] == "done" and obj["decode_progress"] == 100, obj
    upload_file = os.path.join(i2v_server.app.output_dir, f"{job_id}.input.png")
    assert os.path.exists(upload_file)  # the page sent the image, stored by its content's format
    browser.execute_script("document.getElementById('video').play();")
    _wait(lambda: browser.execute_script("return document.getElementById('video').currentTime > 0;"), 30,
          "playback to advance")


class _SlowChunks:
    """A served pipe whose chunks come ``delay`` seconds apart (the page must play before the job ends)."""

    def __init__(self, pipe, delay: float) -> None:
        self._pipe, self._delay = pipe, delay

    def __getattr__(self, name):
        return getattr(self._pipe, name)

    def run(self, plan, on_chunk=None, **kwargs):
        def slow(frames, k, n):
            on_chunk(frames, k, n)
            time.sleep(self._delay)

        return self._pipe.run(plan, on_chunk=slow if on_chunk is not None else None, **kwargs)


@pytest.fixture(scope="module")
def streaming_server(tmp_path_factory):
    """AnyFlow-FAR's tiny built-in (a causal model made chunk by chunk): three chunks, streamed as they are made."""
    import vidax

    pipe = vidax.load("anyflow-far-wan2.1-1.3b", "model.checkpoint=builtin:tiny-random", "sampling.height=32",
                      "sampling.width=32", "sampling.num_frames=13", "sampling.num_steps=1", quiet=True)
    with Server(_SlowChunks(pipe, 1.5), port=0, output_dir=str(tmp_path_factory.mktemp("live") / "out"),
                quiet=True) as srv:
        yield srv
    pipe.close()


def test_page_plays_the_video_while_it_is_made_and_continues_it(streaming_server, browser):
    """The page appends the job's fragmented mp4 to a MediaSource as it arrives: frames decode in the element while
    the job is still in progress; the finished video is continued over the kept cache, played as it comes too."""
    from selenium.webdriver.common.by import By

    browser.get(streaming_server.url + "/")
    browser.find_element(By.NAME, "prompt").send_keys("a red fox in the snow")
    browser.find_element(By.ID, "submit").click()
    job_id = _wait(lambda: browser.execute_script("return document.body.dataset.job || null;"), 60, "the job id")

    def playing():
        state = browser.execute_script(
            "const v = document.getElementById('video');"
            "return v.readyState >= 2 && v.buffered.length && v.buffered.end(0) > 0 ? "
            "{ready: v.readyState, buffered: v.buffered.end(0), w: v.videoWidth} : null;")
        if state:
            state["job"] = json.loads(request(streaming_server.url, "GET", f"/v1/videos/{job_id}")[2])
        return state

    state = _wait(playing, 180, "frames decoded in the page")
    job = state["job"]
    assert job["status"] == "in_progress" and job["chunks_done"] < job["chunks_total"], job  # before the end
    assert state["w"] == 32, state
    _wait(lambda: browser.find_element(By.ID, "status").text.startswith("completed"), 180, "the job to complete")
    extend = browser.find_element(By.ID, "extend")
    assert extend.is_displayed()
    browser.find_element(By.ID, "extend_seconds").clear()
    browser.find_element(By.ID, "extend_seconds").send_keys("1")
    extend.click()
    new_id = _wait(lambda: (browser.execute_script("return document.body.dataset.job;") != job_id
                            and browser.execute_script("return document.body.dataset.job;")), 60, "the continuation")
    cont = _wait(lambda: (lambda j: j if j["status"] in ("completed", "failed") else None)(
        json.loads(request(streaming_server.url, "GET", f"/v1/videos/{new_id}")[2])), 180, "the continuation to end")
    assert cont["status"] == "completed" and cont["extends"] == job_id and cont["frames_ready"] == 16, cont
    _wait(lambda: browser.execute_script(
        "const v = document.getElementById('video'); return v.readyState >= 2 && v.buffered.length > 0;"), 60,
        "the continuation to play")
