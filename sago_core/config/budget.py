"""The run configuration's ``budget`` section: a stratified sample of the grid's cells."""

from __future__ import annotations

from typing import Any

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    field_serializer,
    field_validator,
    model_serializer,
    model_validator,
)

from sago_core.config.base import StrictModel


class BudgetSettings(StrictModel):
    """A budgeted run (sago_core/budget/): ask for a stratified sample of the grid's
    (prompt, variant) cells in at most ``rounds`` rounds instead of every cell. Exactly one of
    ``fraction`` (of the grid's cells, in (0, 1]) or ``generations`` (the cells' answers: a
    cell costs ``generation.samples`` of them, the sampled prompts' base and replay answers
    come on top; dry_run.plan_budget); ``target``: a
    half-width per axis at which the run may stop early; ``seed``: the design's (null: the
    run's seed); ``baseline``: a finished full run of the same design (the last release),
    its cells the estimator's control variate (budget/baseline.py). Absent (null) = the full
    grid, the run id and caches exactly as before."""

    fraction: float | None = None
    generations: int | None = None
    # Axis -> half-width, stored as sorted pairs so the settings stay hashable.
    target: tuple[tuple[str, float], ...] = ()
    rounds: int = Field(default=3, ge=1)
    seed: int | None = None
    baseline: str | None = None

    @field_validator("fraction")
    @classmethod
    def _share(cls, value: float | None) -> float | None:
        if value is not None and not 0 < value <= 1:
            raise ValueError(f"must be in (0, 1], got {value}")
        return value

    @field_validator("generations")
    @classmethod
    def _cells(cls, value: int | None) -> int | None:
        if value is not None and value < 1:
            raise ValueError(f"must be >= 1, got {value}")
        return value

    @field_validator("target", mode="before")
    @classmethod
    def _target_pairs(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return tuple(sorted(value.items()))
        return value

    @field_validator("target")
    @classmethod
    def _known_axes(cls, value: tuple[tuple[str, float], ...]) -> tuple[tuple[str, float], ...]:
        from sago_core.registry.axes import axis_names, axis_spec

        for axis, half_width in value:
            try:
                axis_spec(axis)
            except KeyError:
                known = list(axis_names())
                raise ValueError(f"unknown axis {axis!r}; choose from {known}") from None
            if not half_width > 0:
                raise ValueError(f"half-width of {axis!r} must be > 0, got {half_width}")
        return value

    @field_serializer("target")
    def _target_mapping(self, value: tuple[tuple[str, float], ...]) -> dict[str, float]:
        return dict(value)

    @model_serializer(mode="wrap")
    def _unset_as_before(self, handler: SerializerFunctionWrapHandler) -> Any:
        """Without a baseline, serialised exactly as before it existed (the run id stays)."""
        data = handler(self)
        if self.baseline is None and isinstance(data, dict):
            data.pop("baseline", None)
        return data

    @model_validator(mode="after")
    def _one_size(self) -> BudgetSettings:
        if (self.fraction is None) == (self.generations is None):
            raise ValueError("give exactly one of fraction or generations")
        return self
