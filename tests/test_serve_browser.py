"""The page at ``/`` in a real headless Chromium (Debian's chromium + chromium-driver, driven by selenium): it
loads, a job runs from the form with live progress, and the ``<video>`` element plays the decodable H.264 mp4."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time

import pytest

from serve_stub import load_pipe, request
from vidax_core.serve import Server

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


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

    for path in (CHROMIUM, CHROMEDRIVER):
        assert os.path.exists(path), f"{path} is missing: apt-get install chromium chromium-driver (.ci/run does)"
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
