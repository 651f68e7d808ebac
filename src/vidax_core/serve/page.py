"""The page at ``/``: one self-contained HTML file (no build step, no external assets).

A form bounded by what the served model accepts (prompt, negative prompt, guidance, size, frames, steps, seed, and
an image or clip upload where the model takes one: required for an image-to-video model), a submit button that
posts to ``/v1/videos`` (JSON, or multipart with the upload), live progress by polling the job (the steps, then the
decode on a bar of its own), and a ``<video>`` element that plays the result. For a model that makes its video chunk
by chunk the element plays the video as it arrives (the job's ``content?stream=1``, a fragmented mp4 appended to a
MediaSource as its bytes come; the codec read from the stream's own ``avcC``), the progress counts chunks and frames,
and a causal model offers to continue the finished video (``/v1/videos/{id}/extend``), played as it is made too.
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
<div id="extend_box" hidden><label>Continue by <input type="number" id="extend_seconds" min="0.25" step="0.25"
  value="2"> s</label> <button type="button" id="extend">Continue the video</button></div>
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
    const decoding = !job.chunks_total && (job.phase === "decoding" || job.phase === "writing");
    $("decode").hidden = $("decode_label").hidden = !decoding;
    $("decode").value = job.decode_progress || 0;
    if (job.status === "completed") { return job; }
    if (job.status === "failed") { throw new Error(job.error ? job.error.message : "the job failed"); }
    const phase = job.status === "queued" ? "queued" : (job.phase || "in progress");
    const chunks = job.chunks_total ? "chunk " + job.chunks_done + "/" + job.chunks_total + ", " +
      job.frames_ready + " frames ready, " : "";
    status(phase + ": " + chunks + (decoding ? (job.decode_progress || 0) + "% of the decode" : job.progress + "%"));
    await new Promise((done) => setTimeout(done, 300));
  }
}
function avcCodec(bytes) {  // "avc1.PPCCLL" from the stream's avcC box (profile, constraints, level)
  for (let i = 0; i + 8 < bytes.length; i++) {
    if (bytes[i] === 0x61 && bytes[i + 1] === 0x76 && bytes[i + 2] === 0x63 && bytes[i + 3] === 0x43) {
      const hex = (b) => b.toString(16).padStart(2, "0");
      return "avc1." + hex(bytes[i + 5]) + hex(bytes[i + 6]) + hex(bytes[i + 7]);
    }
  }
  return null;
}
async function playLive(id) {  // the video as it is made: its fragmented mp4 into a MediaSource, chunk by chunk
  const video = $("video");
  video.hidden = false;
  if (!window.MediaSource) { return false; }
  const source = new MediaSource();
  video.src = URL.createObjectURL(source);
  await new Promise((done) => source.addEventListener("sourceopen", done, {once: true}));
  const r = await fetch("/v1/videos/" + id + "/content?stream=1", {cache: "no-store"});
  if (!r.ok || !r.body) { return false; }
  const reader = r.body.getReader();
  let buffer = null, head = new Uint8Array(0);
  const append = (data) => new Promise((done, fail) => {
    buffer.addEventListener("updateend", done, {once: true});
    buffer.addEventListener("error", fail, {once: true});
    buffer.appendBuffer(data);
  });
  while (true) {
    const {value, done} = await reader.read();
    if (done) { break; }
    let data = value;
    if (!buffer) {  // the codec from the init segment, then the source buffer
      const joined = new Uint8Array(head.length + value.length);
      joined.set(head);
      joined.set(value, head.length);
      const codec = avcCodec(joined);
      if (!codec) { head = joined; continue; }
      buffer = source.addSourceBuffer('video/mp4; codecs="' + codec + '"');
      data = joined;
    }
    await append(data);
    if (video.paused) { video.play().catch(() => {}); }
    document.body.dataset.live = String(video.buffered.length ? video.buffered.end(0) : 0);
  }
  if (buffer && source.readyState === "open") { source.endOfStream(); }
  return buffer !== null;
}
async function follow(job, frames) {  // a job to its end, its video played as it comes when the model streams
  document.body.dataset.job = job.id;
  const live = info.streams ? playLive(job.id).catch(() => false) : Promise.resolve(false);
  await poll(job.id);
  $("decode").hidden = $("decode_label").hidden = true;
  status("completed: " + frames + " frames");
  if (!(await live)) {
    const video = $("video");
    video.hidden = false;
    video.src = "/v1/videos/" + job.id + "/content";
    video.play().catch(() => {});
  }
  $("extend_box").hidden = !info.continues;
}
$("extend").addEventListener("click", async () => {
  const id = document.body.dataset.job;
  $("extend").disabled = true;
  try {
    const r = await fetch("/v1/videos/" + id + "/extend", {method: "POST",
      headers: {"Content-Type": "application/json"},
      body: JSON.stringify({seconds: Number($("extend_seconds").value)})});
    const job = await r.json();
    if (!r.ok) { throw new Error(job.error ? job.error.message : r.statusText); }
    await follow(job, job.num_frames);
  } catch (err) {
    status("error: " + err.message, true);
  } finally {
    $("extend").disabled = false;
  }
});
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
    await follow(job, body.num_frames);
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
