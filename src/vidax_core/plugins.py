"""Plugin loading: every family (built-in or third-party) arrives through the entry-point group ``vidax``.

An entry point names a :class:`vidax_core.family.FamilyPlugin` subclass (or an instance of one): its methods are
the hooks, with the core's defaults. pluggy registers the object: it checks each hook method's arguments against
the hook specifications (:mod:`vidax_core.hookspecs`) and collects ``register_models`` from every plugin, the one
hook all plugins answer. Every other hook is per model: :meth:`Plugins.call` calls the method of that name on the
one object that registered the model (as simonw/llm calls a model's methods once its collection hooks ran).

``VIDAX_LOAD_PLUGINS`` (comma-separated entry-point names) restricts which plugins load; an empty value loads
none. A plugin that fails to import, or names no FamilyPlugin, costs one warning line on stderr, never the CLI. A
public method that is no hook (a misspelled one) or takes an argument its hook does not have fails loudly. A hook
that raises anything but a :class:`UserError` raises :class:`vidax_core.errors.PluginError` naming the plugin and
the hook (the CLI reports it as the plugin's error, not vidax's).
"""

from __future__ import annotations

import difflib
import functools
import inspect
import os
import sys
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import pluggy

from vidax_core import hookspecs
from vidax_core.errors import PluginError, UserError
from vidax_core.family import FamilyPlugin, hook_names, overridden_hooks, plugin_object, stray_methods
from vidax_core.registry import ModelSpec, Registry

GROUP = "vidax"


@dataclass(frozen=True)
class PluginInfo:
    name: str
    module: str
    distribution: str
    version: str
    hooks: tuple[str, ...]  # the hooks the family object overrides (the rest are the core's defaults)
    error: str | None = None


class _Manager(pluggy.PluginManager):
    """pluggy's manager, taking every hook method of a :class:`FamilyPlugin` as a hook implementation."""

    def parse_hookimpl_opts(self, plugin, name):
        return {} if name in hook_names() else None


class Plugins:
    """The plugin manager plus the model registry it fills."""

    def __init__(self) -> None:
        self.pm = _Manager(GROUP)
        self.pm.add_hookspecs(hookspecs)
        self.infos: list[PluginInfo] = []
        self._registry: Registry | None = None
        self._owner: dict[str, str] = {}  # model id -> name of the plugin that registered it

    def add(self, plugin: Any, name: str, distribution: str = "", version: str = "") -> None:
        """Register a family object (a :class:`FamilyPlugin` instance, or a subclass to instantiate) under
        ``name``: what an entry point loads, or a test's own."""
        obj = plugin_object(plugin)
        stray = stray_methods(obj)
        if stray:
            close = difflib.get_close_matches(stray[0], sorted(hook_names()), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise pluggy.PluginValidationError(obj, f"plugin {name!r}: method {stray[0]!r} is not a vidax hook"
                                               f"{hint}; name helper methods with a leading underscore")
        self.pm.register(obj, name=name)
        self.infos.append(PluginInfo(name, type(obj).__module__, distribution, version, overridden_hooks(obj)))
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
                self.add(ep.load(), ep.name, dist, version)
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
                info = self._info(impl.plugin_name)

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

    def family_object(self, spec: ModelSpec) -> FamilyPlugin | None:
        """The :class:`FamilyPlugin` object that registered ``spec`` (None: no plugin registered it), for the
        declarations a family makes beside its hooks (``lora_key_map``, ``lora_experts``)."""
        owner = self.owner(spec)
        return self.pm.get_plugin(owner) if owner is not None else None

    def declared(self, spec: ModelSpec, name: str) -> Any:
        """The declaration ``name`` (a :class:`FamilyPlugin` class attribute) of the family that registered
        ``spec``; None for a spec no plugin registered."""
        return getattr(self.family_object(spec), name, None)

    def call(self, hook_name: str, spec: ModelSpec, **kwargs: Any) -> Any:
        """The per-model hook ``hook_name``: the method of that name of the family object that registered
        ``spec``, given the arguments it takes.

        A family's hooks therefore never see another family's models: no plugin needs an "is this mine" guard,
        and a plugin that forgets one cannot answer for a model it does not own. A spec registered by no plugin
        (built by hand in a test) goes to the objects of its family, the last registered first: the first answer
        other than None wins.
        """
        owner = self.owner(spec)
        if owner is not None:
            names = [owner]
        else:
            family = getattr(spec, "family", None)
            names = [n for n, obj in reversed(self.pm.list_name_plugin()) if obj.family == family]
        args = {"spec": spec, **kwargs}
        for name in names:
            method = getattr(self.pm.get_plugin(name), hook_name)
            out = self._run_hook(name, hook_name, method, {a: args[a] for a in _arguments(method)})
            if out is not None or owner is not None:
                return out
        return None

    def _run_hook(self, name: str, hook_name: str, method: Any, kwargs: dict) -> Any:
        """``method`` on ``kwargs``; an exception other than a :class:`UserError` becomes a :class:`PluginError`
        naming the plugin's distribution and the hook."""
        try:
            return method(**kwargs)
        except (UserError, PluginError):
            raise
        except Exception as exc:
            info = self._info(name)
            raise PluginError((info.distribution if info else "") or name, hook_name, exc) from exc

    def _info(self, name: str) -> PluginInfo | None:
        return next((i for i in self.infos if i.name == name), None)

    def preset_for(self, model_id: str) -> dict:
        """The registered preset (config defaults) of ``model_id``."""
        return dict(self.registry.get(model_id).preset)


def _arguments(method: Any) -> tuple[str, ...]:
    """The arguments a hook method takes (an override may take fewer than its hook passes: pluggy checked that
    they are among them when the plugin registered)."""
    return _parameters(getattr(method, "__func__", method))


@functools.cache
def _parameters(function: Any) -> tuple[str, ...]:
    names = tuple(inspect.signature(function).parameters)
    return names[1:] if names and names[0] == "self" else names


_DEFAULT: Plugins | None = None


def get_plugins() -> Plugins:
    """The process-wide plugin manager with all entry-point plugins loaded."""
    global _DEFAULT
    if _DEFAULT is None:
        p = Plugins()
        p.load_entry_points()
        _DEFAULT = p
    return _DEFAULT
