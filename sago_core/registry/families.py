"""The variant families sago builds, each declared once: name, subtypes, whether the semantic
filter checks its meaning, and, for a family the grid builds from a declaration alone, its
grid and its transform.

A declaration (``FamilySpec``) is what the rest of sago knows about a family:

- ``name``: the word in the artifacts' ``family`` column and the first part of its ids;
- ``filtered``: its variants may change the meaning (a rewrite), so the semantic filter
  scores each against its base prompt and rejects the distant ones; False: meaning is
  preserved by construction (surface noise), every variant is kept;
- ``subtypes``: the kinds of change it makes (the ``subtype`` column);
- ``transform``: None for the built-in families, whose grids are typed config sections
  of their own (``variants.register``, ``variants.noise``, ...) built by the grid and the
  stages; otherwise ``"package.module:function"`` (imported on first use) or the function,
  ``(text, subtype, strength, position, rng) -> variant text``, which the grid calls once
  per cell of ``subtypes x strengths x positions`` (``variants.families.<name>`` in a run's
  configuration picks the family and may narrow its cells). ``rng`` is seeded by the
  variant (run seed, dataset, prompt, variant id), so a text never depends on order.
  A transform that returns its text unchanged builds no variant for that prompt.

Adding a family: a transform and one ``FamilySpec``, here or in another package's
``sago.variant_families`` entry point (``registry/plugins.py``; read on the first use of
this registry); ``registered`` for a test, undone on exit.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from sago_core.registry import plugins

# (text, subtype, strength, position, rng) -> the variant's text
Transform = Callable[[str, str, float, str, random.Random], str]
# The config's positions (sago_core.config.variants.Position; the registry imports no config).
_POSITIONS = frozenset({"prefix", "suffix", "global"})


@dataclass(frozen=True)
class FamilySpec:
    name: str
    subtypes: tuple[str, ...]
    filtered: bool = False
    transform: str | Transform | None = None
    strengths: tuple[float, ...] = ()
    positions: tuple[str, ...] = ("global",)
    summary: str = ""

    def transformer(self) -> Transform:
        """The declared transform (imported only now)."""
        if self.transform is None:
            raise ValueError(f"variant family {self.name!r} is built by its own stage")
        transform: Transform = plugins.resolve(self.transform)
        return transform


BUILTIN: tuple[FamilySpec, ...] = (
    FamilySpec("register", ("politeness",), True, summary="politer or ruder wording"),
    FamilySpec(
        "noise",
        ("spacing", "punctuation", "capitalization"),
        summary="extra spaces, marks and capitals",
    ),
    FamilySpec("structural", ("length", "mood"), True, summary="the rewriter's rewordings"),
    FamilySpec(
        "script",
        ("fullwidth", "homoglyph", "diacritics_added", "diacritics_stripped"),
        summary="the same words in other letters (its whole-prompt subtypes name the method)",
    ),
    FamilySpec("language", (), summary="the prompt in another language (subtype: its code)"),
    FamilySpec("round_trip", (), True, summary="a machine translation translated back"),
)


def _check(spec: FamilySpec) -> None:
    if not spec.name.isidentifier():
        raise ValueError(f"variant family {spec.name!r}: the name must be a plain word")
    if spec.transform is None:
        return
    if not spec.subtypes or not spec.strengths or not spec.positions:
        raise ValueError(
            f"variant family {spec.name!r}: a family built from its transform declares "
            "its subtypes, strengths and positions"
        )
    if any(":" in s for s in spec.subtypes) or not set(spec.positions) <= _POSITIONS:
        raise ValueError(
            f"variant family {spec.name!r}: subtypes hold no ':' and positions are "
            f"among {sorted(_POSITIONS)}"
        )


_REGISTRY = plugins.Registry(plugins.VARIANT_FAMILIES, FamilySpec, _check, BUILTIN)
registered = _REGISTRY.registered  # for the ``with`` block only (tests)


def families() -> tuple[FamilySpec, ...]:
    """Every registered family, built in first, in registration order."""
    return tuple(_REGISTRY.loaded().values())


def family_spec(name: str) -> FamilySpec:
    return _REGISTRY.get(name)


def filtered_families() -> frozenset[str]:
    """The families whose variants the semantic filter checks."""
    return frozenset(spec.name for spec in families() if spec.filtered)


def declared_grid_families() -> tuple[str, ...]:
    """The families the grid builds from their declaration (``variants.families``)."""
    return tuple(spec.name for spec in families() if spec.transform is not None)
