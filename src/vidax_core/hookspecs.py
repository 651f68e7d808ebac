"""The hooks a model-family plugin implements.

A family implements them as the methods of one :class:`vidax_core.family.FamilyPlugin` subclass, which holds the
core's default for each, so it overrides only what differs. pluggy holds these specifications: it checks each
method's arguments against them when the plugin registers, and collects ``register_models`` from every plugin.

Every per-model hook takes the :class:`~vidax_core.registry.ModelSpec` first and is called only on the plugin that
registered that model id (:meth:`vidax_core.plugins.Plugins.call`), so several families coexist and no plugin needs
an "is this my model" guard; returning ``None`` means "use the core's default" where a hook has one.
``register_models`` is the one collector hook: every plugin contributes its model ids to the registry. A
per-model hook has one answering plugin, so the core calls that object's method itself rather than through
pluggy's hook calling (which would ask every plugin), and no spec here carries pluggy's ``firstresult``.

What never differed between families is no hook but a default or a declaration of
:class:`vidax_core.family.FamilyPlugin` (``quantization_keep``, ``diffusers_reference``, the streamed block groups =
``DitBuild.block_counts``).

Objects passed in:

* ``spec`` – the frozen :class:`ModelSpec` of the model being run.
* ``ckpt`` – a :class:`vidax_core.io.checkpoint.Checkpoint`: resolved local folder, each component's ``config.json``
  (``ckpt.config("transformer")``) and lazy tensors (``ckpt.tensors("transformer")``).
* ``run`` – the validated, frozen :class:`vidax_core.config.RunConfig`.
"""

from __future__ import annotations

import pluggy

hookspec = pluggy.HookspecMarker("vidax")


@hookspec
def register_models(register):
    """Call ``register(ModelSpec(...))`` once per model id this plugin provides."""


@hookspec
def build_dit(spec, ckpt, run):
    """Return a :class:`vidax_core.model_api.DitBuild` for ``spec``: how to construct the denoiser (NNX module),
    its parameter dtype and its config; or a list of them for a mixture of experts over time (each with its
    ``t_min``/``t_max`` range). The module's ``__call__(latents, timestep, context, **kwargs)`` takes the latents in
    the layout of the family's diffusers pipeline (``DitBuild.latent_shapes``; an array or a dict of arrays), the
    timesteps ``Conditioning.prepare`` produced ((B,) by default), the text context exactly as ``encode_prompt``
    returned it for this branch (an array or a dict of arrays, batch first) and keyword inputs from the
    conditioning (``Conditioning.model_kwargs``) and the guidance strategy (``Branch.model_kwargs``,
    ``Guidance.model_inputs``); it returns the prediction in the latents' layout (same structure). Those keyword
    inputs reach ``pre(latents, timestep, context, **kwargs)`` too when offload drives the staged forward.
    Fill ``DitBuild.heads``, ``patch_size`` and ``block_counts`` (the stacked groups ``offload.enabled`` streams
    from host memory): the core checks ``parallel.tp``/``sp`` and ``offload.chunk_size`` against them before any
    weight loads; ``latent_shapes`` when the latents are not
    ``(B, in_channels, F, H, W)``; ``t_min``/``t_max`` for experts. This hook is called only for models registered
    by this plugin."""


@hookspec
def convert_checkpoint(spec, component, tensors, abstract, config):
    """Convert ``tensors`` (source key -> lazy array) of ``component`` (e.g. "transformer") onto ``abstract``
    (flat path -> ShapeDtypeStruct of the model built by ``build_dit``) and return path -> numpy array. ``config``
    is the component's parsed config.json (layer counts and widths without guessing from key names). Use
    :func:`vidax_core.io.convert.convert` with a declarative key table so every problem is reported at once.
    Return None to decline."""


@hookspec
def shard_rules(spec):
    """Return a sequence of ``(logical_axis_name, mesh_axis_or_None)`` pairs mapping the DiT's logical parameter
    and activation axes (``embed``, ``heads``, ``mlp``, ``layers`` ...) onto mesh axes (``tp``, ``sp``, ``dp``).
    They are layered over :data:`vidax_core.parallel.sharding.DEFAULT_RULES` (batch -> dp, seq -> sp, heads and mlp
    -> tp, the rest replicated), so a plugin names only what it adds or changes; None keeps those defaults (it
    does not replicate everything)."""


@hookspec
def build_text_encoder(spec, ckpt, run, mesh):
    """Load and return the family's prompt encoder object (opaque to the core; handed back to
    ``encode_prompt``). ``vidax run`` builds, uses and frees it BEFORE the denoiser's weights are placed, so a
    large encoder may use the whole accelerator memory; a loaded pipe keeps it between calls as
    ``runtime.text_encoder`` says; ``mesh`` is the run's device mesh (axes dp, sp, tp): place a large
    encoder tensor-parallel across it with :mod:`vidax_core.parallel.sharding` and the encoder's logical axes.
    Return None to decline."""


@hookspec
def encode_prompt(spec, encoder, prompts, run):
    """Encode ``prompts`` with ``encoder`` (from ``build_text_encoder``) into the DiT's text context.

    ``prompts`` is the list of texts the guidance branches read, in the order ``[prompt, negative_prompt]`` (only
    ``[prompt]`` without a negative branch). Return either a numpy array (len(prompts), L, D), a dict of numpy
    arrays each with len(prompts) first (e.g. ``{"hidden": ..., "mask": ..., "pooled": ...}``), or a list with one
    such context per prompt, each with batch 1 (per-prompt unpadded lengths may then differ: the branches run one
    after another instead of batched). Context i goes to the denoiser as ``context`` of the branches reading
    prompt i. Float
    arrays are cast to the denoiser's parameter dtype by the core; integer and boolean arrays (token ids, masks)
    keep theirs. Return None to decline."""


@hookspec
def build_vae(spec, ckpt, run):
    """Load and return the family's :class:`vidax_core.model_api.VideoAutoencoder` (latent shape, decode to
    frames). A loaded pipe keeps it for later calls of the same frame count, size, ``options``, ``vae`` settings
    and kinds of media (:func:`vidax_core.runner.loaded.vae_key`): read nothing else from ``run`` here, and hand
    per-call values (the seed of a decode noise) to the VAE through its ``for_call(run)``. Return None to
    decline."""


@hookspec
def prepare_conditioning(spec, ckpt, run, vae, latent_shape):
    """Return a :class:`vidax_core.model_api.Conditioning` with what the denoiser needs beyond the prompt,
    computed once before sampling: image or video conditioning (``run.image``, ``run.video``; read a clip with
    :func:`vidax_core.io.clip.read_video`), per-token timesteps, per-branch inputs, what to do after each model
    call and after each sampler update. It may serve text-to-video too (e.g. a padding-mask input the model always
    takes). Arrays named in ``model_kwargs`` are passed as keyword arguments to the denoiser's ``__call__`` and,
    under offload, to its ``pre``. ``latent_shape`` is (frames, height, width) of the latents. Return None when
    nothing is needed."""


@hookspec
def scheduler(spec, ckpt, run):
    """Return a :class:`vidax_core.schedulers.base.Sampler` to use when the run names none
    (``sampling.scheduler: null``). Return None to let the core read the checkpoint's
    ``scheduler/scheduler_config.json``."""


@hookspec
def guidance(spec, ckpt, run):
    """Return the :class:`vidax_core.guidance.Guidance` strategy of this run (classifier-free with either formula,
    per-step scales, guidance rescale, spatio-temporal guidance, embedded guidance ...), built from
    ``run.sampling.guidance_scale`` / ``guidance_scale_2`` and the model's ``run.options``. Return None for the
    default: classifier-free ``uncond + g * (cond - uncond)`` when ``guidance_scale > 1``, else one pass."""


@hookspec
def sampling_plan(spec, ckpt, run, sampler, latent_shape):
    """Return keyword arguments for ``sampler.plan(...)`` beyond the step count: an explicit ``sigmas`` or
    ``timesteps`` list (distilled schedules), ``mu`` or ``seq_len`` for a dynamic shift from the token count.
    ``latent_shape`` is (frames, height, width) of the latents. With ``sigmas``/``timesteps`` given the step count
    is their length. ``denoise_strength`` (0 < s <= 1) starts the plan part way, as diffusers' ``get_timesteps``:
    the last ``int(N * s)`` of its N steps. Return None for ``sampler.plan(run.sampling.num_steps)``."""


@hookspec
def sampling_passes(spec, ckpt, run):
    """Return the denoising passes of this run, a list of :class:`vidax_core.model_api.SamplingPass`, when the
    model's recipe chains several (LTX-Video's multi-scale recipe: a pass at a smaller size, the latent upscaler,
    a second pass). The frames of the last pass are resized to ``run.sampling.height`` x ``width`` when their size
    differs. Return None for one pass of ``run`` itself."""


@hookspec
def resolution_binning(spec, ckpt, run):
    """Return a :class:`vidax_core.binning.ResolutionBins` when ``run`` samples at the aspect-ratio bin closest to
    its ``sampling.height`` x ``width`` (diffusers' ``use_resolution_binning``: PixArt, SANA, SANA-Video): every
    pass then runs at the bin's size (the ``sampling_passes`` hook and everything after it see that run), and the
    decoded frames are resized to cover the requested size and centre-cropped (bilinear, the pipelines'
    ``resize_and_crop_tensor``). Called before the passes are planned, from the config files alone. Return None to
    sample at the requested size."""


@hookspec
def sampling_windows(spec, ckpt, run):
    """Return a :class:`vidax_core.windows.WindowedSampling` when ``run`` makes its video in windows (chunked,
    autoregressive sampling: Helios' chunks, SkyReels-V2's diffusion-forcing windows): each window a denoising
    loop conditioned on latents made before it, decoded and appended to the video as it completes. A causal family
    (AnyFlow-FAR) declares its KV cache on it (``WindowedSampling.cache``, :mod:`vidax_core.causal`): every window's
    steps read it, every finished window writes into it. It is called before any weight loads (from the config files
    alone; keep it cheap) and once more per call for the object that carries the windows' state. Return None for one
    ordinary denoising pass."""


@hookspec
def frame_stages(spec, ckpt, run):
    """Return the :class:`vidax_core.model_api.FrameStage` list of ``run`` when its decoded frames go through
    further models (a video super-resolution stage after the generator): each stage a run of another registered
    video-to-video id over the frames of the one before it, checked and planned when this model loads (before any
    weight is read), its frames what the run writes. Called from the config files alone; keep it cheap. Return
    None for none."""


@hookspec
def predict_num_frames(spec, ckpt, run, context):
    """For a model that predicts its length (``ModelSpec.predicts`` holds ``"num_frames"``) and a run that leaves
    ``sampling.num_frames`` unset: return ``(num_frames, info)``, the frame count for this prompt (one the model
    accepts) and a JSON-able dict of what was predicted (e.g. ``{"seconds": ...}``; the run prints it and puts it
    in its metrics as ``predicted``). ``context`` is the encoded prompt, what ``encode_prompt`` returned for it.
    Called after the prompt is encoded, before the latent grid is planned. Return None to decline."""


@hookspec
def check_run(spec, run):
    """Return a list of one-line problems with ``run`` for this model (e.g. "sampling.num_frames must be 4k+1
    for Wan, got 16: use 17"), checked before any heavy work; an empty list when all is well. Return None to
    decline."""


@hookspec
def builtin_checkpoint(spec, name):
    """Return the local folder (diffusers layout) of the built-in checkpoint ``name`` (e.g. "tiny-random") that
    ships with the plugin, used by ``model.checkpoint: builtin:<name>`` for demos and tests without downloads.
    Return None to decline."""


@hookspec
def open_checkpoint(spec, path):
    """Claim the local folder ``path`` that has no ``model_index.json`` (e.g. a model's original release files)
    and return a :class:`vidax_core.io.checkpoint.Checkpoint` (usually a subclass) that answers in diffusers terms:
    ``config(component)`` and ``tensors(component)`` (keys renamed to the diffusers names, values lazy),
    ``has``, ``require``, ``model_index``, ``root``. Read ``.pth`` files only with :mod:`vidax_core.io.pth`. Raise a
    :class:`vidax_core.errors.UserError` for a folder that is clearly of your layout but incomplete; return None
    to decline (the core then reads a folder with a ``transformer/`` folder as diffusers layout, and reports any
    other as not in a known layout)."""


@hookspec
def component_file(spec, component, tensors, published):
    """Read one component from a single file (a ComfyUI models folder's file or ``model.files.<component>``):
    ``tensors`` is the file's key -> lazy array mapping (a wrapper prefix such as ``model.diffusion_model.``
    removed; an 8-bit encoder already dequantised), ``published`` the component's config from the id's published
    layout (None when none ships). Return ``(tensors, config)`` in diffusers terms (keys renamed lazily, e.g. with
    :class:`vidax_core.io.renamed.RenamedTensors`; the config read from the shapes where the file carries none)
    when the file is in your original release's layout; return None when it already uses the diffusers /
    transformers names (the core then takes ``published``, a T5-family encoder's sizes read from its tensors)."""


@hookspec
def open_files(spec, files, base):
    """Read a run's single files as ONE checkpoint, for a family whose files each hold several parts or whose
    parts' configs depend on one another (LTX-2.0: one file holds the DiT, the text connectors, both VAEs and the
    vocoder). ``files`` maps component -> path (``transformer``, ``text_encoder``, ``vae``..., ``tokenizer`` a
    folder), found by the core in a ComfyUI models folder with the id's ``comfy_files`` patterns or named with
    ``model.files``, every component the id needs present; ``base`` is the id's published layout (configs, no
    weights) or the local checkpoint ``model.files`` completes. Return a
    :class:`vidax_core.io.checkpoint.Checkpoint` answering in diffusers terms, or None to decline (the core then
    reads each file on its own through ``component_file``)."""


@hookspec
def bench_dit(spec, need_reference, config):
    """Return the model parts of ``vidax bench --dit-only`` for ``spec``'s family (random weights, no
    checkpoint weights read), an object with (see :mod:`vidax_core.bench.dit` for how each is timed):

    ``config``: the denoiser's ``config.json`` dict from the user's ``model.checkpoint`` (a config-only folder is
    enough), so any published width can be timed; None when no checkpoint was given (the plugin's default shape).

    * ``label`` (str), ``latent_shape`` ((C, F, H, W) of one sample), ``context_shape`` ((L, D) text tokens),
      ``video_tokens`` (int), ``flow_shift`` (float, of the UniPC sampler both sides use);
    * ``abstract_dit(blocks)`` -> zero-argument constructor of the vidax denoiser with ``blocks`` blocks;
    * ``paired_dits(blocks, seed)`` -> ``(vidax nnx.Module, reference module, parameter count)`` holding the same
      weights (only called when ``need_reference``);
    * ``reference_steps(ref, latents, context, guidance, num_steps)`` -> ``(engines, latents_fn, facts)``:
      ``engines`` maps a name to a zero-argument callable that runs and synchronises one guided reference step,
      ``latents_fn()`` gives the first engine's latents as numpy, ``facts`` is a dict for the report (a callable
      value is called after timing);
    * ``vae_decoder()`` -> ``(decode(z), latent_shape(frames, size), trace_counts())`` for the VAE
      compile-time part, or None to skip it.

    When ``need_reference`` is true, raise a one-line :class:`vidax_core.errors.UserError` if the reference's
    packages are missing. Return None to decline."""


@hookspec
def vae_latent_shape(spec, ckpt, run):
    """Return ``(latent_frames, latent_height, latent_width)`` of ``run``'s video from the VAE's configuration
    alone, without reading any weight: the planner (:mod:`vidax_core.runner.plan`) checks every call's grid against
    the denoiser's patch, position limits and ``parallel.sp`` with it before anything loads, and the dry run prints
    it. It must equal what the VAE object of ``build_vae`` reports (a call checks that). Return None to decline: a
    call then plans its grid once the VAE is built, and the dry run says the token check was skipped."""


@hookspec
def check_checkpoint(spec, ckpt, run):
    """Return a list of one-line problems with the checkpoint ``ckpt`` for this model and ``run``, found from its
    configuration files alone (no weight is read): e.g. an image-to-video model id given a text-to-video checkpoint
    (its denoiser takes 16 input channels, this model needs 36), or a config.json whose numbers disagree with each
    other. Each line names the file and the key. An empty list when all is well; None to decline."""


@hookspec
def quantization_outside_blocks(spec, component):
    """Return regexes (full matches of the '/'-joined parameter path, e.g. ``time_proj``) of the denoiser's Linear
    layers outside its stacked block groups that are 8-bit too in an 8-bit run: the large embedder / projection
    matrices the family's published 8-bit files store 8-bit. None or empty: every layer outside the blocks stays in
    full precision (the core's default)."""
