"""The study's configuration (``sago study``): model series of checkpoints, ID and OOD datasets.

``evaluation`` is an ordinary run configuration (preset, grid, n, seed...); its ``models``
are replaced by every checkpoint of every series, in order, so the SGS comes from the same
evaluation flow as any run and is cached and resumed the same way.

``make_series`` (optional) describes checkpoint series the study builds when missing: a
fine-tuning series trained on an ID training split held out from every evaluation set, and
a quantisation ladder, both of ``base``. Their checkpoints join ``series`` as ``finetune``
and ``quantize``. ``statistics`` chooses the ID adjustment, the permutation blocks, alpha and
which p-value the Holm/BH corrections use (``sago_core.statistics.partial_correlation``).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from sago_core.artifacts.layout import RunLayout
from sago_core.config import RunConfig, StrictModel, build_config
from sago_core.config.base import renamed_key
from sago_core.config.errors import describe_errors
from sago_core.errors import ConfigError
from sago_core.statistics.partial_correlation import KNOT_QUANTILES, Adjustment
from sago_core.study.design import Reachability, study_reachability
from sago_core.training.split import BUILTIN_TRAINING

MIN_CHECKPOINTS = 4  # a linear partial correlation with one control needs n - 3 >= 1
FINETUNE, QUANTIZE = "finetune", "quantize"


class TrainingSplitSettings(StrictModel):
    """The ID training split: ``builtin_train``, a dataset name or a file; ``n`` rows drawn
    with ``seed``. ``hold_out_evaluated``: draw only from rows no evaluation set holds (by id
    or normalised text); false takes the rows as they are, and any overlap is refused."""

    dataset: str = BUILTIN_TRAINING
    n: int = Field(default=24, ge=1)
    seed: int = 0
    hold_out_evaluated: bool = True


class SeriesSettings(StrictModel):
    """Checkpoint series built when missing, under ``folder``/finetune and /quantize."""

    base: str = "smollm2-135m"
    folder: Path
    training: TrainingSplitSettings = TrainingSplitSettings()
    finetune_steps: tuple[int, ...] = (0, 1, 2, 3, 4, 6, 8, 10)
    learning_rate: float = Field(default=5e-5, gt=0)
    batch_size: int = Field(default=4, ge=1)
    quantize_bits: tuple[int, ...] = (32, 10, 8, 7, 6, 5, 4, 3)

    @field_validator("finetune_steps")
    @classmethod
    def _steps(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if any(s < 0 for s in value) or list(value) != sorted(set(value)):
            raise ValueError("finetune_steps must be distinct, increasing and >= 0")
        return value

    @field_validator("quantize_bits")
    @classmethod
    def _bits(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if any(b < 2 for b in value) or list(value) != sorted(set(value), reverse=True):
            raise ValueError("quantize_bits must be distinct, decreasing and >= 2")
        return value

    def finetune_folder(self, step: int) -> Path:
        return self.folder / FINETUNE / f"step-{step:04d}"

    def quantize_folder(self, bits: int) -> Path:
        return self.folder / QUANTIZE / f"bits-{bits:02d}"

    def series(self) -> dict[str, tuple[str, ...]]:
        series = {}
        if self.finetune_steps:
            series[FINETUNE] = tuple(f"hf:{self.finetune_folder(s)}" for s in self.finetune_steps)
        if self.quantize_bits:
            series[QUANTIZE] = tuple(f"hf:{self.quantize_folder(b)}" for b in self.quantize_bits)
        return series


class StudyStatistics(StrictModel):
    """``adjustment``: the headline adjustment (both are always computed, the table's
    ``method`` column tells them apart). ``corrected_test``: the p-value Holm and BH correct
    over the pairs of one metric, series and method; significance is Holm's p <= alpha.
    ``spline_knots``: null (the default) chooses them by the number of checkpoints
    (``statistics.partial_correlation.knots_for``); a number (3 to 7) fixes them."""

    adjustment: Adjustment = "linear"
    spline_knots: int | None = None
    block_length: int = Field(default=2, ge=1)
    permutation_draws: int = Field(default=9999, ge=99)
    alpha: float = Field(default=0.05, gt=0, lt=1)
    corrected_test: Literal["permutation", "t"] = "permutation"
    report_metric: str = "ref_loglik"

    @field_validator("spline_knots")
    @classmethod
    def _knots(cls, value: int | None) -> int | None:
        if value is not None and value not in KNOT_QUANTILES:
            raise ValueError(f"spline_knots must be one of {sorted(KNOT_QUANTILES)}")
        return value


class StudyConfig(StrictModel):
    series: dict[str, tuple[str, ...]]  # name: its checkpoints, in order (was ``families``)
    in_distribution: str
    out_of_distribution: tuple[str, ...] = Field(min_length=2)
    evaluation: RunConfig
    make_series: SeriesSettings | None = None  # series built when missing (was ``series``)
    statistics: StudyStatistics = StudyStatistics()
    run_id: str | None = None

    @field_validator("series")
    @classmethod
    def _enough_checkpoints(cls, value: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        if not value:
            raise ValueError("name at least one series of checkpoints")
        for name, models in value.items():
            if len(models) < MIN_CHECKPOINTS:
                raise ValueError(
                    f"series {name!r} has {len(models)} checkpoints; a partial correlation "
                    f"across checkpoints needs at least {MIN_CHECKPOINTS}"
                )
            if len(set(models)) != len(models):
                raise ValueError(f"series {name!r} lists a checkpoint twice")
        return value

    @model_validator(mode="after")
    def _datasets_apart(self) -> StudyConfig:
        if self.in_distribution in self.out_of_distribution:
            raise ValueError(f"{self.in_distribution!r} is both in- and out-of-distribution")
        if len(set(self.out_of_distribution)) != len(self.out_of_distribution):
            raise ValueError("out_of_distribution lists a dataset twice")
        return self

    def checkpoints(self) -> list[tuple[str, int, str]]:
        """(series, position in the series, model spec), in the configured order."""
        return [
            (name, position, model)
            for name, models in self.series.items()
            for position, model in enumerate(models)
        ]

    def design_check(self) -> list[Reachability]:
        """Can a pair be significant at all with these series, pairs, test and alpha?
        (``sago_core.study.design``; computed before anything runs.)"""
        stats = self.statistics
        return study_reachability(
            {name: len(models) for name, models in self.series.items()},
            len(self.out_of_distribution),
            stats.corrected_test,
            stats.alpha,
            stats.block_length,
            stats.permutation_draws,
            stats.spline_knots,
        )

    def preflight_config(self) -> RunConfig:
        """The evaluation as it can be checked before the series exist: the series' base in
        place of the checkpoints the study builds."""
        if (made := self.make_series) is None:
            return self.evaluation
        built = {m for models in made.series().values() for m in models}
        others = tuple(m for m in self.evaluation.models if m not in built)
        return self.evaluation.model_copy(update={"models": (*others, f"hf:{made.base}")})

    def result_hash(self) -> str:
        payload = self.model_dump(mode="json", exclude={"run_id"})
        payload["evaluation"] = self.evaluation.result_hash()
        # hashed under the keys' first names, so a saved study keeps its folder
        payload["families"], payload["series"] = payload.pop("series"), payload.pop("make_series")
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()

    def run_dir(self) -> Path:
        # The folder keeps its first prefix, so a saved study resumes in its own folder.
        name = self.run_id or f"consistency-{self.result_hash()[:12]}"
        return RunLayout.of(self.evaluation.runs_dir, name).run_dir


def current_names(values: dict[str, Any]) -> dict[str, Any]:
    """A study file's values under today's keys, one note line on stderr per old key:
    ``families`` is ``series``, and a ``series`` block with a ``folder`` (the series built
    when missing) is ``make_series``."""
    block = values.get("series")
    if isinstance(block, dict) and isinstance(block.get("folder"), str):
        print(
            "note: the study key series (the series to build) is now make_series", file=sys.stderr
        )
        values = renamed_key(values, "series", "make_series")
    if "families" in values:
        print("note: the study key families is now series", file=sys.stderr)
    return renamed_key(values, "families", "series")


def _with_series(values: dict[str, Any], source: str) -> dict[str, Any]:
    """The made series' checkpoints joined to ``series`` (a name used by both is an error)."""
    if values.get("make_series") is None:
        return values
    try:
        made = SeriesSettings.model_validate(values["make_series"])
    except ValidationError as exc:
        problems = describe_errors(exc, SeriesSettings)
        raise ConfigError(
            f"invalid study configuration ({source}): make_series: {problems}"
        ) from exc
    series = dict(values.get("series") or {})
    for name, models in made.series().items():
        if name in series:
            raise ConfigError(f"{source}: series.{name} is also built by make_series; rename one")
        series[name] = list(models)
    return {**values, "series": series, "make_series": made}


def build_study_config(values: dict[str, Any], source: str) -> StudyConfig:
    """Parse a study file: the evaluation block through the run config's own rules."""
    try:
        values = current_names(dict(values))
    except ValueError as exc:
        raise ConfigError(f"invalid study configuration ({source}): {exc}") from exc
    values = _with_series(values, source)
    evaluation = dict(values.pop("evaluation", None) or {})
    series = values.get("series")
    if isinstance(series, dict):
        models = [m for checkpoints in series.values() for m in (checkpoints or [])]
        evaluation["models"] = list(dict.fromkeys(models)) or None
    run = build_config(evaluation.pop("preset", None), evaluation, source=f"{source}: evaluation")
    try:
        return StudyConfig.model_validate({**values, "evaluation": run})
    except ValidationError as exc:
        problems = describe_errors(exc, StudyConfig)
        raise ConfigError(f"invalid study configuration ({source}): {problems}") from exc
