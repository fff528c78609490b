"""The axes sago measures, each declared once: name, scale, needs, delta rule, tolerance.

A declaration (``AxisSpec``) is everything the rest of sago knows about an axis:

- ``name``: the word in ``deltas.parquet``'s ``axis`` column and in ``d_<name>`` columns;
- ``scale``: the axis's fixed scale R_X (``delta_norm = delta / scale``; docs/method.md);
- ``needs``: the backend capabilities its measurement needs (``registry/backends.py``;
  empty: generated text is enough), which the dry-run plan reports per model;
- ``delta``: its rule, ``"package.module:function"`` (imported when deltas are computed, so
  this registry imports no polars) or the function itself, returning two polars
  expressions over one row of the delta join (``scoring/deltas.py``): the signed delta, and
  the reason when it is null. The row holds the variant's ``analysis``, ``pairs`` and
  ``mirroring`` columns, its base's ``logprob_base``/``ent_base``/``reason_base``, and
  ``thinking``/``base_thinking``;
- ``tolerance``: the bench's largest |difference| between two pipelines on this axis;
- ``family``: None for an axis of every run; a variant family's name for an axis measured
  only in runs that have variants of it (``lang``: the ``language`` family). Such
  an axis is registered but left out of ``axes()``/``axis_names()`` (and so of
  ``vocabulary.AXES``, the artifacts' axis columns, tables and figures): a run without that
  family is exactly what it was. ``axes_for(families)`` adds it where the family is present.

Registration order is the order of ``vocabulary.AXES``, of the artifacts' axis columns,
tables and figures. Adding an axis: one module with its measurement and its delta rule,
plus one ``AxisSpec`` line in ``BUILTIN`` below, or the same declaration in another
package's ``sago.axes`` entry point (``registry/plugins.py``; read on the first use of this
registry); ``registered`` for a test, undone on exit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sago_core.registry import plugins

if TYPE_CHECKING:
    import polars as pl

    from sago_core.registry.backends import Capability

# () -> (signed delta, reason when it is null), polars expressions over the delta join's row.
DeltaRule = Callable[[], "tuple[pl.Expr, pl.Expr]"]


@dataclass(frozen=True)
class AxisSpec:
    name: str
    scale: float
    delta: str | DeltaRule
    tolerance: float
    needs: frozenset[Capability] = frozenset()
    summary: str = ""
    family: str | None = None  # measured only in runs with variants of this family
    # True: the delta is a continuous difference of two measurements of one prompt (a
    # per-prompt scale times a shape the prompts share); False: a comparison of two answers,
    # 0 unless the answer changed (events). A budgeted run picks its root by it.
    continuous: bool = False

    def rule(self) -> tuple[pl.Expr, pl.Expr]:
        """(signed delta, reason when null), by the declared rule (imported only now)."""
        rule: DeltaRule = plugins.resolve(self.delta)
        return rule()


BUILTIN: tuple[AxisSpec, ...] = (
    AxisSpec(
        "act",
        2.0,
        "sago_core.axes.activation:act_delta_rule",
        1e-4,
        frozenset({"activations"}),
        "mean per-layer cosine of hidden states, variant vs base, minus 1",
        continuous=True,
    ),
    AxisSpec(
        "bleu",
        100.0,
        "sago_core.axes.text_similarity:bleu_delta_rule",
        1e-6,
        summary="BLEU of the variant's answer against the base answer, minus 100",
    ),
    AxisSpec(
        "bert",
        1.0,
        "sago_core.axes.text_similarity:bert_delta_rule",
        2e-3,
        summary="BERTScore F1 of the variant's answer against the base answer, minus 1",
    ),
    AxisSpec(
        "prob",
        250.0,
        "sago_core.axes.likelihood:prob_delta_rule",
        2e-2,
        frozenset({"logprobs"}),
        "log-probability of the base answer under the variant minus under the base prompt",
        continuous=True,
    ),
    AxisSpec(
        "ent",
        10.0,
        "sago_core.axes.likelihood:ent_delta_rule",
        1e-3,
        frozenset({"logprobs"}),
        "mean token entropy over the base answer, variant minus base prompt",
        continuous=True,
    ),
    AxisSpec(
        "mr",
        1.0,
        "sago_core.axes.mirroring:mr_delta_rule",
        0.0,
        summary="mirroring indicator of the variant's answer minus the base answer's",
    ),
    AxisSpec(
        "lang",
        1.0,
        "sago_core.axes.language_fidelity:lang_delta_rule",
        0.0,
        summary="answer in the prompt's language (1) or not (0), minus 1",
        family="language",  # vocabulary.LANGUAGE_FAMILY (vocabulary imports this module)
    ),
)


def _check(spec: AxisSpec) -> None:
    if not spec.name.isidentifier() or not spec.scale > 0:
        raise ValueError(f"axis {spec.name!r}: a plain name and a positive scale are required")


_REGISTRY = plugins.Registry(plugins.AXES, AxisSpec, _check, BUILTIN)
registered = _REGISTRY.registered  # for the ``with`` block only (tests)


def axes() -> tuple[AxisSpec, ...]:
    """Every registered axis of every run (``family`` None), in registration order."""
    return tuple(spec for spec in _REGISTRY.loaded().values() if spec.family is None)


def axis_names() -> tuple[str, ...]:
    return tuple(spec.name for spec in axes())


def axes_for(families: Iterable[str]) -> tuple[AxisSpec, ...]:
    """The axes of a run whose variants are of ``families``: every run's axes, then each
    conditional axis whose family is among them, in registration order."""
    present = set(families)
    return tuple(
        spec
        for spec in _REGISTRY.loaded().values()
        if spec.family is None or spec.family in present
    )


def axis_spec(name: str) -> AxisSpec:
    """A registered axis by name (conditional ones included)."""
    return _REGISTRY.get(name, KeyError)
