"""sago's shared vocabulary: the axes and their fixed scales R_X (docs/method.md), the
tolerances of the tests, and the ids of the base prompt, its replay and the pooled row.
One home for these words; every other module asks here.

``AXES`` and ``SCALES`` are live views of the axis registry (``sago_core/registry/axes.py``,
where each axis is declared once): an axis registered there, even after this module was
imported, is in them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import overload

from sago_core.registry.axes import axes, axis_names, axis_spec


class _AxisNames(Sequence[str]):
    """The registered axes' names, in registration order; equal to the tuple of them."""

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[str, ...]: ...
    def __getitem__(self, index: int | slice) -> str | tuple[str, ...]:
        return axis_names()[index]

    def __len__(self) -> int:
        return len(axis_names())

    def __iter__(self) -> Iterator[str]:
        return iter(axis_names())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return tuple(self) == tuple(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(axis_names())


class _AxisScales(Mapping[str, float]):
    """R_X of each registered axis."""

    def __getitem__(self, axis: str) -> float:
        return axis_spec(axis).scale

    def __len__(self) -> int:
        return len(axis_names())

    def __iter__(self) -> Iterator[str]:
        return iter(axis_names())

    def __repr__(self) -> str:
        return repr({a.name: a.scale for a in axes()})


AXES: Sequence[str] = _AxisNames()
SCALES: Mapping[str, float] = _AxisScales()
EPSILONS: tuple[float, ...] = (0.01, 0.05, 0.10)
MAIN_EPSILON = 0.05
# The two-sided 95% normal quantile: every normal-approximation interval's.
Z95 = 1.959963984540054
BASE_VARIANT_ID = "base"
# A base row's family and subtype, and the replay's subtype (it is the base asked again).
BASE_FAMILY = "base"
POOLED = "__pooled__"
# The base prompt asked again: its deltas are the noise floor, never part of a score.
REPLAY_FAMILY = "replay"
REPLAY_VARIANT_ID = "replay:base:0:global"
# What a variant is, beside its id: the columns every variant row carries.
VARIANT_COLUMNS = ("family", "subtype", "strength", "position")
# The columns that name a prompt (its dataset and id), a model's prompt, and one row of a
# model's answers (a prompt's variant): the keys every stage joins on.
PROMPT_KEY = ("dataset", "prompt_id")
MODEL_PROMPT_KEY = ("model", *PROMPT_KEY)
ROW_KEY = (*MODEL_PROMPT_KEY, "variant_id")
# The variant family that asks the prompt in another language (variants/language.py; its
# subtype is the language code), and the language of the prompts themselves.
LANGUAGE_FAMILY = "language"
BASE_LANGUAGE = "en"
# A NaN or inf measurement is missing with this reason, never a number in a score.
NON_FINITE = "non-finite measurement"


def normalise(axis: str, delta: float) -> float:
    """delta / R_axis (zero stays zero)."""
    return delta / SCALES[axis]
