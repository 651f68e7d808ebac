"""The page at ``/``: one self-contained HTML file (no build step, no external assets).

A form bounded by what the served model accepts (prompt, negative prompt, guidance, size, frames, steps, seed, and
an image or clip upload where the model takes one: required for an image-to-video model), a submit button that
posts to ``/v1/videos`` (JSON, or multipart with the upload), live progress by polling the job (the steps, then the
decode on a bar of its own), and a ``<video>`` element that plays the result.
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
  <label class="wide">Negative prompt
    <textarea name="negative_prompt" id="negative_prompt" rows="2" maxlength="__MAXPROMPT__"></textarea></label>
  <label class="wide" id="media_label" hidden><span id="media_name">Image</span>
    <input type="file" name="input_reference" id="input_reference"></label>
  <label>Width <input type="number" name="width" id="width" required></label>
  <label>Height <input type="number" name="height" id="height" required></label>
  <label>Frames <select name="num_frames" id="num_frames"></select></label>
  <label>Steps <input type="number" name="num_steps" id="num_steps" required></label>
  <label>Guidance <input type="number" name="guidance_scale" id="guidance_scale" min="0" step="any"></label>
  <label>Seed <input type="number" name="seed" id="seed" min="0" step="1"></label>
  <button type="submit" id="submit">Generate</button>
</form>
<div id="status" role="status"></div>
<progress id="progress" max="100" value="0" hidden></progress>
<div id="decode_label" hidden>decoding</div>
<progress id="decode" max="100" value="0" hidden></progress>
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
  $("negative_prompt").value = d.negative_prompt || "";
  if (d.guidance_scale !== null && d.guidance_scale !== undefined) { $("guidance_scale").value = d.guidance_scale; }
  const kinds = [].concat(info.takes_image ? ["image/*"] : [], info.takes_video ? ["video/mp4", "video/webm"] : []);
  if (kinds.length) {
    $("media_label").hidden = false;
    $("input_reference").accept = kinds.join(",");
    $("input_reference").required = info.needs_image;
    $("media_name").textContent = (info.takes_image ? "Image" : "")
      + (info.takes_image && info.takes_video ? " or " : "")
      + (info.takes_video ? "clip" : "") + (info.needs_image ? " (first frame)" : " (optional)");
  }
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
    const decoding = job.phase === "decoding" || job.phase === "writing";
    $("decode").hidden = $("decode_label").hidden = !decoding;
    $("decode").value = job.decode_progress || 0;
    if (job.status === "completed") { return job; }
    if (job.status === "failed") { throw new Error(job.error ? job.error.message : "the job failed"); }
    const phase = job.status === "queued" ? "queued" : (job.phase || "in progress");
    status(phase + ": " + (decoding ? (job.decode_progress || 0) + "% of the decode" : job.progress + "%"));
    await new Promise((done) => setTimeout(done, 300));
  }
}
$("form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = new FormData($("form"));
  const body = {prompt: form.get("prompt")};
  if (form.get("negative_prompt")) { body.negative_prompt = form.get("negative_prompt"); }
  for (const key of ["width", "height", "num_frames", "num_steps", "seed", "guidance_scale"]) {
    if (form.get(key) !== "" && form.get(key) !== null) { body[key] = Number(form.get(key)); }
  }
  const upload = $("input_reference").files[0];
  $("submit").disabled = true;
  $("progress").hidden = false;
  $("progress").value = 0;
  $("decode").hidden = $("decode_label").hidden = true;
  status("submitting");
  try {
    let request = {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)};
    if (upload) {  // multipart: the fields as text, the file as input_reference
      const parts = new FormData();
      for (const [key, value] of Object.entries(body)) { parts.append(key, String(value)); }
      parts.append("input_reference", upload, upload.name);
      request = {method: "POST", body: parts};
    }
    const r = await fetch("/v1/videos", request);
    const job = await r.json();
    if (!r.ok) { throw new Error(job.error ? job.error.message : r.statusText); }
    document.body.dataset.job = job.id;
    await poll(job.id);
    $("decode").hidden = $("decode_label").hidden = true;
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
