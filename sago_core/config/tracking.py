"""The run configuration's ``tracking`` section: the experiment trackers a finished run is
logged to (``sago_core/tracking``).

Tracking says where results are reported, not what is computed: like ``runs_dir`` it is
kept out of the run id and every cache key, and a run without the section serialises as if
it never existed. A tracker that is down or refuses never fails the run: the run's own
artifacts stay the record, and one warning line says what was not logged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from sago_core.config.base import StrictModel
from sago_core.errors import ConfigError

WandbMode = Literal["online", "offline"]
# What a bare --track value starts with when it is an MLflow tracking URI.
URI_SCHEMES = ("http://", "https://", "file:", "sqlite:", "postgresql:", "mysql:", "databricks")


class MlflowSettings(StrictModel):
    """An MLflow tracking server or store. ``tracking_uri``: ``http://host:5000``, a
    ``file:`` folder or a ``sqlite:///`` database, as MLflow reads it. ``experiment``: null,
    the default, puts each model in the experiment of its family (``sago/<family>``, the
    watch's notion of a family: the architecture its ``config.json`` states, else the spec),
    so a model's releases land in one experiment and MLflow's own charts show the trend.
    ``timeout_s``: how long a server may take to answer before it counts as down."""

    tracking_uri: str
    experiment: str | None = None
    timeout_s: float = Field(default=10.0, gt=0)

    @field_validator("tracking_uri", "experiment")
    @classmethod
    def _not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must not be empty")
        return None if value is None else value.strip()


class WandbSettings(StrictModel):
    """Weights & Biases. ``project`` (and ``entity``, null: the account's default) name
    where runs go. ``mode``: ``online`` or ``offline``; null, the default, leaves it to W&B's
    own settings (``WANDB_MODE``, ``wandb offline``). ``dir``: where W&B writes its local
    files (null: its own default, ``./wandb``); an offline run is uploaded later with
    ``wandb sync``. The API key comes from W&B's own login or ``WANDB_API_KEY``, never from
    this file. ``timeout_s``: how long W&B may take to start a run (online: to reach its
    server) before the run counts as not logged."""

    project: str = "sago"
    entity: str | None = None
    mode: WandbMode | None = None
    dir: Path | None = None
    timeout_s: float = Field(default=30.0, gt=0)


class TrackingSettings(StrictModel):
    """Which trackers a finished run is logged to: at least one of ``mlflow`` and
    ``wandb``."""

    mlflow: MlflowSettings | None = None
    wandb: WandbSettings | None = None

    @model_validator(mode="after")
    def _some_tracker(self) -> TrackingSettings:
        if self.mlflow is None and self.wandb is None:
            raise ValueError("names no tracker: give mlflow (tracking_uri) or wandb (project)")
        return self


def track_option(values: list[str]) -> dict[str, Any]:
    """The ``tracking`` section from the command line's ``--track`` values (repeatable):
    ``mlflow=URI`` or a bare tracking URI (``http://...``, ``file:...``, ``sqlite:///...``)
    for MLflow; ``wandb`` or ``wandb=PROJECT`` for W&B. A merge override, validated with the
    rest of the config."""
    section: dict[str, Any] = {}
    for value in values:
        name, _, rest = value.partition("=")
        if name == "wandb":
            section["wandb"] = {"project": rest} if rest else {}
        elif name == "mlflow" and rest:
            section["mlflow"] = {"tracking_uri": rest}
        elif value.startswith(URI_SCHEMES):
            section["mlflow"] = {"tracking_uri": value}
        else:
            raise ConfigError(
                f"--track {value!r}: give mlflow=URI, a tracking URI "
                f"({', '.join(URI_SCHEMES)}...), wandb or wandb=PROJECT"
            )
    return section
