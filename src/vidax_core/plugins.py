"""Plugin loading: every family (built-in or third-party) arrives through the entry-point group ``vidax``.

An entry point names a :class:`vidax_core.family.FamilyPlugin` (subclass or instance, or a module exposing one as
``plugin``): its methods are the hooks, with the core's defaults. A module of ``@hookimpl`` functions (the older
form) still registers as it is.

``VIDAX_LOAD_PLUGINS`` (comma-separated entry-point names) restricts which plugins load; an empty value loads
none. A plugin that fails to import costs one warning line on stderr, never the CLI. Hook implementations with
misspelled names fail loudly through ``check_pending``. A per-model hook that raises anything but a
:class:`UserError` raises :class:`vidax_core.errors.PluginError` naming the plugin and the hook (the CLI reports it
as the plugin's error, not vidax's).
"""

from __future__ import annotations

import difflib
import os
import sys
from dataclasses import dataclass
from importlib import metadata
from types import ModuleType
from typing import Any

import pluggy

from vidax_core import hookspecs
from vidax_core.errors import PluginError, UserError
from vidax_core.family import FamilyPlugin, as_plugin_object, hook_names, stray_methods
from vidax_core.registry import ModelSpec, Registry

GROUP = "vidax"


@dataclass(frozen=True)
class PluginInfo:
    name: str
    module: str
    distribution: str
    version: str
    hooks: tuple[str, ...]
    error: str | None = None


class _Manager(pluggy.PluginManager):
    """pluggy's manager, taking every hook method of a :class:`FamilyPlugin` as a hook implementation."""

    def parse_hookimpl_opts(self, plugin, name):
        if isinstance(plugin, FamilyPlugin):
            return {} if name in hook_names() else None
        return super().parse_hookimpl_opts(plugin, name)


class Plugins:
    """The plugin manager plus the model registry it fills."""

    def __init__(self) -> None:
        self.pm = _Manager(GROUP)
        self.pm.add_hookspecs(hookspecs)
        self.infos: list[PluginInfo] = []
        self._registry: Registry | None = None
        self._owner: dict[str, str] = {}  # model id -> name of the plugin that registered it

    @property
    def hook(self) -> Any:
        return self.pm.hook

    def add(self, module: ModuleType | Any, name: str, distribution: str = "", version: str = "") -> None:
        """Register a plugin object/module (used for entry points and by tests)."""
        module = as_plugin_object(module)
        if isinstance(module, FamilyPlugin):
            stray = stray_methods(module)
            if stray:
                close = difflib.get_close_matches(stray[0], sorted(hook_names()), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise pluggy.PluginValidationError(module, f"plugin {name!r}: method {stray[0]!r} is not a vidax hook"
                                                   f"{hint}; name helper methods with a leading underscore")
        self.pm.register(module, name=name)
        self.pm.check_pending()
        hooks = tuple(sorted(h.name for h in self.pm.get_hookcallers(module) or ()))
        mod = getattr(module, "__name__", type(module).__name__)
        self.infos.append(PluginInfo(name, mod, distribution, version, hooks))
        self._registry = None

    def load_entry_points(self) -> None:
        wanted = os.environ.get("VIDAX_LOAD_PLUGINS")
        allow = None if wanted is None else {n.strip() for n in wanted.split(",") if n.strip()}
        for ep in sorted(metadata.entry_points(group=GROUP), key=lambda e: e.name):
            if allow is not None and ep.name not in allow:
                continue
            if self.pm.has_plugin(ep.name):
                continue
            dist = ep.dist.name if ep.dist is not None else ""
            version = ep.dist.version if ep.dist is not None else ""
            try:
                module = ep.load()
                self.add(module, ep.name, dist, version)
            except pluggy.PluginValidationError:
                raise
            except Exception as exc:  # a broken plugin must not take the CLI down
                msg = f"{type(exc).__name__}: {exc}".splitlines()[0]
                print(f"warning: plugin {ep.name!r} ({dist}) failed to load and is skipped: {msg}", file=sys.stderr)
                self.infos.append(PluginInfo(ep.name, ep.value, dist, version, (), error=msg))

    @property
    def registry(self) -> Registry:
        if self._registry is None:
            reg = Registry()
            self._owner = {}
            for impl in self.pm.hook.register_models.get_hookimpls():
                info = next((i for i in self.infos if i.name == impl.plugin_name), None)

                def register(spec: ModelSpec, _info=info, _name=impl.plugin_name) -> None:
                    from dataclasses import replace

                    reg.register(
                        replace(
                            spec,
                            plugin=spec.plugin or (_info.distribution if _info else _name) or _name,
                            version=spec.version or (_info.version if _info else ""),
                        )
                    )
                    self._owner[spec.id] = _name

                impl.function(register=register)
            self._registry = reg
        return self._registry

    def owner(self, spec: ModelSpec) -> str | None:
        """The name of the plugin that registered ``spec`` (None for a spec no plugin registered)."""
        self.registry  # noqa: B018 - fills the owner table
        return self._owner.get(spec.id)

    def family_object(self, spec: ModelSpec) -> Any:
        """The :class:`FamilyPlugin` object that registered ``spec`` (None: a module plugin, or no owner), for
        the declarations a family makes beside its hooks (``lora_key_map``, ``lora_experts``)."""
        owner = self.owner(spec)
        obj = self.pm.get_plugin(owner) if owner is not None else None
        return obj if isinstance(obj, FamilyPlugin) else None

    def call(self, hook_name: str, spec: ModelSpec, **kwargs: Any) -> Any:
        """Call the per-model hook ``hook_name`` on the plugin that registered ``spec`` only.

        A family's hooks therefore never see another family's models: no plugin needs an "is this mine" guard,
        and a plugin that forgets one cannot answer for a model it does not own. A spec registered by no plugin
        (built by hand in a test) goes to every plugin (a family object: of its family), first answer wins.
        """
        caller = getattr(self.pm.hook, hook_name)
        owner = self.owner(spec)
        args = {"spec": spec, **kwargs}
        for impl in reversed(caller.get_hookimpls()):  # pluggy's order: the last registered answers first
            if not _may_answer(impl, owner, spec):
                continue
            out = self._run_hook(impl, hook_name, {name: args[name] for name in impl.argnames})
            if out is not None or owner is not None:
                return out
        return None

    def _run_hook(self, impl: Any, hook_name: str, kwargs: dict) -> Any:
        """``impl``'s hook function on ``kwargs``; an exception other than a :class:`UserError` becomes a
        :class:`PluginError` naming the plugin's distribution and the hook."""
        try:
            return impl.function(**kwargs)
        except (UserError, PluginError):
            raise
        except Exception as exc:
            info = next((i for i in self.infos if i.name == impl.plugin_name), None)
            raise PluginError((info.distribution if info else "") or impl.plugin_name, hook_name, exc) from exc

    def preset_for(self, model_id: str) -> dict:
        """The registered preset (config defaults) of ``model_id``."""
        return dict(self.registry.get(model_id).preset)


def _may_answer(impl: Any, owner: str | None, spec: ModelSpec) -> bool:
    """The owner answers for its models; for a spec no plugin registered, every plugin may, except that a family
    object answers only for its own family (its defaults would otherwise answer for any model)."""
    if owner is not None:
        return impl.plugin_name == owner
    return not isinstance(impl.plugin, FamilyPlugin) or impl.plugin.family == getattr(spec, "family", None)


_DEFAULT: Plugins | None = None


def get_plugins() -> Plugins:
    """The process-wide plugin manager with all entry-point plugins loaded."""
    global _DEFAULT
    if _DEFAULT is None:
        p = Plugins()
        p.load_entry_points()
        _DEFAULT = p
    return _DEFAULT
