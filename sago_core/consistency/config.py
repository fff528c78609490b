"""The consistency study's configuration: model families of checkpoints, ID and OOD datasets.

``evaluation`` is an ordinary run configuration (preset, grid, n, seed...); its ``models``
are replaced by every checkpoint of every family, in order, so the SGS comes from the same
evaluation flow as any run and is cached and resumed the same way.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator, model_validator

from sago_core.config import RunConfig, StrictModel, build_config
from sago_core.errors import ConfigError

MIN_CHECKPOINTS = 4  # a partial correlation with one control needs n - 3 >= 1


class ConsistencyConfig(StrictModel):
    families: dict[str, tuple[str, ...]]
    in_distribution: str
    out_of_distribution: tuple[str, ...] = Field(min_length=2)
    evaluation: RunConfig
    run_id: str | None = None

    @field_validator("families")
    @classmethod
    def _enough_checkpoints(cls, value: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        if not value:
            raise ValueError("name at least one family of checkpoints")
        for family, models in value.items():
            if len(models) < MIN_CHECKPOINTS:
                raise ValueError(
                    f"family {family!r} has {len(models)} checkpoints; a partial correlation "
                    f"across checkpoints needs at least {MIN_CHECKPOINTS}"
                )
            if len(set(models)) != len(models):
                raise ValueError(f"family {family!r} lists a checkpoint twice")
        return value

    @model_validator(mode="after")
    def _datasets_apart(self) -> ConsistencyConfig:
        if self.in_distribution in self.out_of_distribution:
            raise ValueError(f"{self.in_distribution!r} is both in- and out-of-distribution")
        if len(set(self.out_of_distribution)) != len(self.out_of_distribution):
            raise ValueError("out_of_distribution lists a dataset twice")
        return self

    def checkpoints(self) -> list[tuple[str, int, str]]:
        """(family, position in the family, model spec), in the configured order."""
        return [
            (family, position, model)
            for family, models in self.families.items()
            for position, model in enumerate(models)
        ]

    def result_hash(self) -> str:
        payload = self.model_dump(mode="json", exclude={"run_id"})
        payload["evaluation"] = self.evaluation.result_hash()
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()

    def run_dir(self) -> Path:
        name = self.run_id or f"consistency-{self.result_hash()[:12]}"
        return (self.evaluation.runs_dir / name).resolve()


def build_consistency_config(values: dict[str, Any], source: str) -> ConsistencyConfig:
    """Parse a consistency file: the evaluation block through the run config's own rules."""
    values = dict(values)
    evaluation = dict(values.pop("evaluation", None) or {})
    families = values.get("families")
    if isinstance(families, dict):
        models = [m for checkpoints in families.values() for m in (checkpoints or [])]
        evaluation["models"] = list(dict.fromkeys(models)) or None
    run = build_config(evaluation.pop("preset", None), evaluation, source=f"{source}: evaluation")
    try:
        return ConsistencyConfig.model_validate({**values, "evaluation": run})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(f"invalid consistency configuration ({source}): {problems}") from exc
