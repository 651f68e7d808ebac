"""The plugin object a model family registers: one subclass of :class:`FamilyPlugin`, overriding only what differs.

Every per-model hook of :mod:`vidax_core.hookspecs` is a method here with the core's default behaviour, so a
family states what is its own (its models, its DiT build, its key table, its checks) and inherits the rest:

* ``register_models`` registers one :class:`ModelSpec` per entry of ``models`` (with ``family``,
  ``checkpoint_formats`` and ``options``);
* ``shard_rules`` returns None: the core's default rules;
* ``dit_config`` parses the transformer config.json with ``dit_config_class`` and ``conversion_rules`` returns
  ``dit_rules`` (both ``".module:name"`` inside the plugin's package, imported on first use);
* ``build_dit`` builds ``dit_class`` from ``dit_config`` at the run's weight dtype (:meth:`FamilyPlugin.dit_build`:
  the config's own ``build_fields()``, the functions ``dit_flops`` / ``dit_grid_limit`` / ``dit_example_inputs``
  name); None without ``dit_class``;
* ``convert_checkpoint`` applies ``conversion_rules()`` to the components in ``dit_components``;
* ``open_checkpoint`` calls the function ``original_format`` names with ``(spec, path)`` (a reader of the
  family's original release folders), None without one; ``open_files`` calls the one ``files_format`` names with
  ``(spec, files, base)`` (single files read as one checkpoint), None without one;
* ``vae_latent_shape`` calls the function ``vae_latent_grid`` names with the checkpoint's VAE config and the
  run's frames, height and width (None without one, or without a ``vae/`` component);
* ``builtin_checkpoint`` serves ``assets/<name>`` beside the subclass's module;
* ``check_run`` returns ``run_problems(spec, run)`` of the module ``checks`` names (``".checks"``) and
  ``check_checkpoint`` reports a ``transformer/config.json`` that ``dit_config`` cannot parse, then returns that
  module's ``checkpoint_problems(spec, ckpt, run, dit_config)`` (either function may be absent);
* ``quantization_outside_blocks`` makes no Linear layer outside the stacked blocks 8-bit;
* every other hook returns None ("use the core's default").

Besides hooks, a family declares (class attributes): its ``models``, ``options``, ``checkpoint_formats``, the
``dit_components`` / ``dit_config_class`` / ``dit_class`` / ``dit_flops`` / ``dit_grid_limit`` /
``dit_example_inputs`` / ``dit_rules`` / ``checks`` / ``original_format`` / ``files_format`` / ``vae_latent_grid``
its default hooks read, ``diffusers_reference`` (``".module:Class"`` inside the plugin's package, called with
``(ckpt_dir, run)``: the reference of ``vidax bench --reference diffusers``), ``quantization_keep`` (regexes of the
Linear layers an 8-bit run keeps in full precision; None: :data:`vidax_core.quant.keep.DEFAULT_KEEP`, norms,
modulation, embeddings, patch embedding, heads), ``cache_layout``, ``lora_experts`` and ``text_layer_readers``
(the sizes a random checkpoint with a cut text encoder scales: :mod:`vidax_core.bench.text_layers`). Offload
streams every group of ``DitBuild.block_counts``.

Public methods of a subclass must be hooks or the helpers defined here (``dit_config``, ``dit_build``,
``conversion_rules``, ``conversion_ignore``, ``lora_key_map``): any other public method is refused when the plugin
loads, so a misspelled hook fails loudly. Name private helpers with a leading underscore. This module imports no
JAX: a family imports its model code inside the methods. A ``".module:name"`` reference is inside the subclass's
package; an absolute one (``"vidax_core.wan_dit.model:WanDiT"``) names any module.
"""

from __future__ import annotations

import functools
import sys
from importlib import import_module
from types import ModuleType
from typing import Any, Mapping, Sequence

from vidax_core.registry import ModelSpec, Option


class FamilyPlugin:
    """Base class of a family's plugin object (see the module docstring for the defaults)."""

    family: str = ""
    models: Sequence[Mapping[str, Any]] = ()  # ModelSpec keyword arguments (id, tasks, preset, ...), one per id
    options: Mapping[str, Option] = {}
    checkpoint_formats: tuple[str, ...] = ("diffusers",)
    dit_components: tuple[str, ...] = ("transformer",)  # checkpoint folders converted with conversion_rules()
    diffusers_reference: str | None = None  # ".bench_reference:FamilyDiffusersReference"
    dit_config_class: str | None = None  # ".dit:FamilyDiTConfig": dit_config() parses transformer/config.json with it
    dit_class: str | None = None  # ".dit:FamilyDiT": the denoiser build_dit builds (dit_build)
    dit_flops: str | None = None  # ".flops:counter": f(dit config) -> DitBuild.flops
    dit_grid_limit: str | None = None  # ".checks:grid_limit": f(dit config) -> DitBuild.grid_limit
    dit_example_inputs: str | None = None  # ".dit:example_inputs": DitBuild.example_inputs = partial(f, dit config)
    original_format: str | None = None  # ".original_format:open_original": open_checkpoint's f(spec, path)
    files_format: str | None = None  # ".files:open_files": open_files's f(spec, files, base), single files as one
    vae_latent_grid: str | None = None  # ".vae:latent_grid": vae_latent_shape's f(vae config, frames, height, width)
    dit_rules: str | None = None  # ".convert_dit:DIT_RULES": conversion_rules() of every dit_components folder
    checks: str | None = None  # ".checks": its run_problems / checkpoint_problems answer check_run / check_checkpoint
    cache_layout: Any = None  # vidax_core.cache.layout.CacheLayout for step caching; None = its defaults
    quantization_keep: Sequence[str] | None = None  # layers an 8-bit run keeps in full precision; None: DEFAULT_KEEP
    lora_experts: Mapping[str, str] = {}  # LoRA ``expert`` name -> denoiser component (models with several)
    text_layer_readers: Sequence[Any] = ()  # vidax_core.bench.text_layers.TextLayerReader: sizes that follow the
    # text encoder's layer count, scaled when a random checkpoint cuts it
    vae_decode_frames: int | None = None  # frames one untiled decode program makes; None: all (vae/decode_memory.py)

    # ---- helpers a family overrides (not hooks) ----

    def dit_config(self, ckpt: Any, **overrides: Any) -> Any:
        """The family's DiT config parsed from ``ckpt``'s transformer config.json by ``dit_config_class``'s
        ``from_config`` (None: the family declares none)."""
        if not self.dit_config_class:
            return None
        return self._ref(self.dit_config_class).from_config(ckpt.config("transformer"), **overrides)

    def conversion_rules(self, component: str) -> Sequence[Any] | None:
        """The :class:`vidax_core.io.convert.KeyRule` table converting ``component``: ``dit_rules`` (None: no
        default conversion)."""
        return self._ref(self.dit_rules) if self.dit_rules else None

    def dit_build(self, cfg: Any, **fields: Any) -> Any:
        """The :class:`vidax_core.model_api.DitBuild` of ``dit_class`` built from the DiT config ``cfg``: what the
        config states of its architecture (``cfg.build_fields()``: latent channels, heads, patch, stacked groups,
        a latent layout other than (B, C, F, H, W)), the answers of the functions ``dit_flops``, ``dit_grid_limit``
        and ``dit_example_inputs`` name, and ``fields`` over all of them."""
        from vidax_core.model_api import DitBuild

        declared: dict[str, Any] = {}
        if self.dit_flops:
            declared["flops"] = self._ref(self.dit_flops)(cfg)
        if self.dit_grid_limit:
            declared["grid_limit"] = self._ref(self.dit_grid_limit)(cfg)
        if self.dit_example_inputs:
            declared["example_inputs"] = functools.partial(self._ref(self.dit_example_inputs), cfg)
        return DitBuild.of(self._ref(self.dit_class), cfg, **{**cfg.build_fields(), **declared, **fields})

    def _ref(self, ref: str) -> Any:
        """The object ``".module:name"`` names inside the subclass's package (imported on first use)."""
        module, _, name = ref.partition(":")
        return getattr(self._module(module), name)

    def _module(self, module: str) -> ModuleType:
        """The module ``module`` (``".name"``: inside the subclass's package), imported on first use."""
        return import_module(module, type(self).__module__.rpartition(".")[0] or None)

    def _check_function(self, name: str) -> Any:
        """``name`` in the module ``checks`` names, or None (no module declared, or it has no such function)."""
        return getattr(self._module(self.checks), name, None) if self.checks else None

    def conversion_ignore(self, component: str) -> Sequence[str]:
        """Regexes of ``component``'s source keys that are known and dropped on purpose."""
        return ()

    def lora_key_map(self, spec: Any, layout: str) -> Any:
        """How a LoRA file's module names for model ``spec`` in ``layout`` (``"original"``:
        the family's original release names, as
        ``diffusion_model.``-prefixed and kohya files use them; ``"diffusers"``) become the module names of the
        checkpoint tensors ``convert_checkpoint`` reads: a callable ``name -> name``, or None (unchanged)."""
        return None

    # ---- hooks ----

    def register_models(self, register):
        for m in self.models:
            register(ModelSpec(**{"family": self.family, "checkpoint_formats": self.checkpoint_formats,
                                  "options": dict(self.options),
                                  "vae_decode_frames": self.vae_decode_frames, **m}))  # a model's own entries win

    def build_dit(self, spec, ckpt, run):
        if not self.dit_class:
            return None
        from vidax_core.model_api import dit_weight_dtype

        return self.dit_build(self.dit_config(ckpt, dtype=dit_weight_dtype(run)))

    def convert_checkpoint(self, spec, component, tensors, abstract, config):
        rules = self.conversion_rules(component) if component in self.dit_components else None
        if rules is None:
            return None
        from vidax_core.io.convert import convert

        return convert(tensors, rules, abstract, component=f"{self.family} DiT ({component})",
                       ignore=self.conversion_ignore(component))

    def shard_rules(self, spec):
        return None

    def build_text_encoder(self, spec, ckpt, run, mesh):
        return None

    def encode_prompt(self, spec, encoder, prompts, run):
        return None

    def build_vae(self, spec, ckpt, run):
        return None

    def prepare_conditioning(self, spec, ckpt, run, vae, latent_shape):
        return None

    def scheduler(self, spec, ckpt, run):
        return None

    def guidance(self, spec, ckpt, run):
        return None

    def sampling_plan(self, spec, ckpt, run, sampler, latent_shape):
        return None

    def sampling_passes(self, spec, ckpt, run):
        return None

    def resolution_binning(self, spec, ckpt, run):
        return None

    def sampling_windows(self, spec, ckpt, run):
        return None

    def frame_stages(self, spec, ckpt, run):
        return None

    def predict_num_frames(self, spec, ckpt, run, context):
        return None

    def check_run(self, spec, run):
        check = self._check_function("run_problems")
        return check(spec, run) if check else None

    def builtin_checkpoint(self, spec, name):
        from vidax_core.io.builtin import packaged_checkpoint

        return packaged_checkpoint(sys.modules[type(self).__module__].__file__, name)

    def open_checkpoint(self, spec, path):
        return self._ref(self.original_format)(spec, path) if self.original_format else None

    def component_file(self, spec, component, tensors, published):
        return None

    def open_files(self, spec, files, base):
        return self._ref(self.files_format)(spec, files, base) if self.files_format else None

    def bench_dit(self, spec, need_reference, config):
        return None

    def vae_latent_shape(self, spec, ckpt, run):
        if not self.vae_latent_grid or not ckpt.has("vae"):
            return None
        s = run.sampling
        return self._ref(self.vae_latent_grid)(ckpt.config("vae"), s.num_frames, s.height, s.width)

    def quantization_outside_blocks(self, spec, component):
        return ()

    def check_checkpoint(self, spec, ckpt, run):
        from vidax_core.errors import UserError

        try:
            dit = self.dit_config(ckpt)
        except UserError as exc:  # names its own file (an original release has no transformer/config.json)
            return [str(exc)]
        except Exception as exc:  # noqa: BLE001 - a config value the config class could not take
            return [f"transformer/config.json: unusable ({' '.join(str(exc).split())[:160]})"]
        check = self._check_function("checkpoint_problems")
        return list(check(spec, ckpt, run, dit)) if check else []


@functools.cache
def hook_names() -> frozenset[str]:
    """Every hook the core declares."""
    from vidax_core import hookspecs

    return frozenset(n for n in dir(hookspecs) if hasattr(getattr(hookspecs, n), "vidax_spec"))


HELPERS = frozenset({"dit_config", "dit_build", "conversion_rules", "conversion_ignore", "lora_key_map"})


def diffusers_reference(family: Any, engine: str, ckpt_dir: str, run: Any) -> Any:
    """The reference run ``family`` declares for ``vidax bench --reference ENGINE`` (``diffusers_reference``,
    instantiated with ``(ckpt_dir, run)``), or None."""
    ref = getattr(family, "diffusers_reference", None)
    if engine != "diffusers" or not ref or not isinstance(family, FamilyPlugin):
        return None
    return family._ref(ref)(ckpt_dir, run)


def stray_methods(plugin: FamilyPlugin) -> list[str]:
    """Public methods of ``plugin``'s class that are neither hooks nor base helpers (misspelled hooks)."""
    allowed = hook_names() | HELPERS
    out = []
    for cls in type(plugin).__mro__:
        if cls in (FamilyPlugin, object):
            continue
        out += [n for n, v in vars(cls).items() if callable(v) and not n.startswith("_") and n not in allowed
                and not isinstance(v, type)]
    return sorted(set(out))


def overridden_hooks(plugin: FamilyPlugin) -> tuple[str, ...]:
    """The hooks ``plugin``'s class answers itself (the others are :class:`FamilyPlugin`'s defaults)."""
    return tuple(sorted(n for n in hook_names() if getattr(type(plugin), n) is not getattr(FamilyPlugin, n)))


def plugin_object(loaded: Any) -> FamilyPlugin:
    """The object to register for what an entry point loaded: a :class:`FamilyPlugin` subclass is instantiated, an
    instance registers as it is; anything else is refused (an entry point names ``"package.module:Class"``)."""
    obj = loaded() if isinstance(loaded, type) and issubclass(loaded, FamilyPlugin) else loaded
    if not isinstance(obj, FamilyPlugin):
        what = f"module {loaded.__name__}" if isinstance(loaded, ModuleType) else type(loaded).__name__
        raise TypeError(f"the entry point names {what}, not a vidax_core.FamilyPlugin subclass: name the plugin "
                        "class, 'package.module:Class'")
    return obj
