"""The bases of a family's architecture config: what every frozen config dataclass read from a config.json shares.

A family's config subclasses :class:`ArchConfig` (a transformer's :class:`TransformerConfig`) and declares only its
own fields and checks: ``from_config`` parses the checkpoint's dict with :func:`~vidax_core.io.arch.from_config_dict`
(every value checked), ``__post_init__`` gives an ``out_channels`` of None the value of ``in_channels`` (diffusers'
``out_channels or in_channels``; a subclass calls ``super().__post_init__()`` before its own checks), and
:class:`CheckedConfig` runs the family's ``check_supported()`` in ``from_config``. The bases declare no fields: a
config's fields, and so what it reads from config.json, stay its own.
"""

from __future__ import annotations

from typing import Any, ClassVar, Mapping, Self

from vidax_core.errors import UserError
from vidax_core.io.arch import from_config_dict


class ArchConfig:
    """Mixin for a frozen dataclass named after a reference's config.json."""

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **overrides: Any) -> Self:
        """Build from a checkpoint config dict; keys that are not fields (``_class_name``...) are ignored."""
        return from_config_dict(cls, config, **overrides)

    def __post_init__(self) -> None:
        if getattr(self, "out_channels", 0) is None:
            object.__setattr__(self, "out_channels", self.in_channels)

    def require(self, family: str, **expected: Any) -> None:
        """Raise ValueError at the first field that is not its ``expected`` value: the config.json settings a
        family's implementation has one way of (``activation_fn="gelu-approximate"``...)."""
        for name, want in expected.items():
            got = getattr(self, name)
            if got != want:
                raise ValueError(f"{name}={got!r}: {family} supports only {want!r}")


class CheckedConfig(ArchConfig):
    """An :class:`ArchConfig` whose ``from_config`` also runs ``check_supported()``: a layout the family does not
    build is one ``error:`` line when the checkpoint is read, not a shape error later. A subclass lists what it
    cannot build in ``problems()`` and names itself in ``label`` (``"the CogVideoX VAE config"``)."""

    label: ClassVar[str] = "the config"

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **overrides: Any) -> Self:
        cfg = super().from_config(config, **overrides)
        cfg.check_supported()
        return cfg

    def problems(self) -> list[str]:
        """Every setting this implementation does not build, one phrase each (none by default)."""
        return []

    def check_supported(self) -> None:
        """Raise one :class:`~vidax_core.errors.UserError` naming every problem (the module's constructor calls it
        too, for configs built in code)."""
        problems = self.problems()
        if problems:
            raise UserError(f"{self.label}: " + "; ".join(problems))


class TransformerConfig(ArchConfig):
    """An attention model's config with diffusers' ``num_attention_heads`` x ``attention_head_dim`` width."""

    @property
    def dim(self) -> int:
        return self.num_attention_heads * self.attention_head_dim

    def build_fields(self) -> dict[str, Any]:
        """What a denoiser build (:class:`vidax_core.model_api.DitBuild`) reads of this architecture, by diffusers'
        names: the latent channels (``out_channels``), the heads, the (t, h, w) ``patch_size`` and one stacked
        group ``blocks`` of ``num_layers``. A config that names them otherwise, or has more groups, says its own."""
        return {"in_channels": self.out_channels, "heads": self.num_attention_heads,
                "patch_size": tuple(self.patch_size), "block_counts": {"blocks": self.num_layers}}
