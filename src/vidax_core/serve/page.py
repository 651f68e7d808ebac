"""The page at ``/``: one self-contained HTML file (no build step, no external assets).

A form (prompt, size, frames, steps, seed) bounded by what the served model accepts, a submit button that posts
to ``/v1/videos``, live progress by polling the job, and a ``<video>`` element that plays the result.
"""

from __future__ import annotations

import html
import json
from typing import Any

_TEMPLATE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>vidax: __TITLE__</title>
<style>
body { font-family: system-ui, sans-serif; max-width: 46rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
h1 { font-size: 1.3rem; margin-bottom: .2rem; }
.model { color: #666; margin-top: 0; }
form { display: grid; grid-template-columns: repeat(4, 1fr); gap: .6rem 1rem; }
label { display: flex; flex-direction: column; font-size: .85rem; color: #444; }
label.wide { grid-column: 1 / -1; }
textarea, input, select { font: inherit; padding: .3rem; }
button { grid-column: 1 / -1; font: inherit; padding: .5rem; cursor: pointer; }
#status { margin: 1rem 0 .3rem; min-height: 1.2rem; }
#status.error { color: #b00020; }
progress { width: 100%; }
video { width: 100%; margin-top: 1rem; background: #000; }
</style>
</head>
<body>
<h1>vidax</h1>
<p class="model">model <code>__TITLE__</code></p>
<form id="form">
  <label class="wide">Prompt
    <textarea name="prompt" id="prompt" rows="3" required maxlength="__MAXPROMPT__"></textarea></label>
  <label>Width <input type="number" name="width" id="width" required></label>
  <label>Height <input type="number" name="height" id="height" required></label>
  <label>Frames <select name="num_frames" id="num_frames"></select></label>
  <label>Steps <input type="number" name="num_steps" id="num_steps" required></label>
  <label>Seed <input type="number" name="seed" id="seed" min="0" step="1"></label>
  <button type="submit" id="submit">Generate</button>
</form>
<div id="status" role="status"></div>
<progress id="progress" max="100" value="0" hidden></progress>
<video id="video" controls muted loop playsinline hidden></video>
<script id="info" type="application/json">__INFO__</script>
<script>
"use strict";
const info = JSON.parse(document.getElementById("info").textContent);
const $ = (id) => document.getElementById(id);
function setup() {
  const d = info.defaults, s = info.size_step;
  for (const key of ["width", "height"]) {
    Object.assign($(key), {min: s, step: s, max: info.max_side, value: d[key]});
  }
  Object.assign($("num_steps"), {min: 1, max: info.max_steps, step: 1, value: d.num_steps});
  $("seed").value = d.seed;
  for (const n of info.frame_choices) {
    const opt = document.createElement("option");
    opt.value = n;
    opt.textContent = n + " (" + (n / info.fps).toFixed(2) + " s)";
    opt.selected = n === d.num_frames;
    $("num_frames").appendChild(opt);
  }
  $("prompt").value = d.prompt || "";
}
function status(text, isError) {
  $("status").textContent = text;
  $("status").className = isError ? "error" : "";
}
async function poll(id) {
  while (true) {
    const r = await fetch("/v1/videos/" + id, {cache: "no-store"});
    const job = await r.json();
    if (!r.ok) { throw new Error(job.error ? job.error.message : r.statusText); }
    $("progress").value = job.progress;
    if (job.status === "completed") { return job; }
    if (job.status === "failed") { throw new Error(job.error ? job.error.message : "the job failed"); }
    status(job.status.replace("_", " ") + ": " + job.progress + "%");
    await new Promise((done) => setTimeout(done, 300));
  }
}
$("form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = new FormData($("form"));
  const body = {prompt: form.get("prompt")};
  for (const key of ["width", "height", "num_frames", "num_steps", "seed"]) {
    if (form.get(key) !== "" && form.get(key) !== null) { body[key] = Number(form.get(key)); }
  }
  $("submit").disabled = true;
  $("progress").hidden = false;
  $("progress").value = 0;
  status("submitting");
  try {
    const r = await fetch("/v1/videos", {method: "POST", headers: {"Content-Type": "application/json"},
                                          body: JSON.stringify(body)});
    const job = await r.json();
    if (!r.ok) { throw new Error(job.error ? job.error.message : r.statusText); }
    document.body.dataset.job = job.id;
    await poll(job.id);
    status("completed: " + body.num_frames + " frames");
    const video = $("video");
    video.hidden = false;
    video.src = "/v1/videos/" + job.id + "/content";
    video.play().catch(() => {});
  } catch (err) {
    status("error: " + err.message, true);
  } finally {
    $("submit").disabled = false;
  }
});
setup();
</script>
</body>
</html>
"""


def render_page(info: dict[str, Any]) -> str:
    """The page for ``info`` (model id, defaults, size step, frame choices, limits; see App.page_info)."""
    data = json.dumps(info).replace("</", "<\\/")
    return (_TEMPLATE.replace("__TITLE__", html.escape(str(info["model"])))
            .replace("__MAXPROMPT__", str(int(info["max_prompt_chars"])))
            .replace("__INFO__", data))
