"""A temperature sweep: one study, one plain run per temperature.

``generation.temperatures: [0, 0.3, 0.7, 1.0]`` expands into arms. Each arm is an ordinary
run configuration: the sweep's own settings with ``temperature`` set to the arm's T,
``temperatures`` cleared, ``samples`` the configured K at T > 0 and 1 at T = 0 (K greedy
answers would be K identical answers), and no ``run_id``, so its run folder is the one a
plain run of the same settings has (``RunConfig.resolved_run_id``: preset + result hash). A
greedy configuration serialises without the sampling keys, so the T = 0 arm hashes exactly
as the plain greedy run with the same settings: when that run exists, every stage of the
arm is a cache hit, and a sweep rerun resumes each arm where it stopped.

The sweep's own folder (``runs/<sweep id>/``) holds its configuration (``run_config.json``,
what ``sago resume`` reads), ``sweep.parquet`` and ``sweep.html`` (``report/sweep/page.py``) and
the sweep's card. The sweep id is ``run_id`` when given, else derived from the arms' run ids
(each already the hash of everything that changes its results), so a sweep of other arms
lands elsewhere.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from sago_core.config import SAMPLING_KEYS, GenerationSettings, RunConfig
from sago_core.errors import ConfigError


@dataclass(frozen=True)
class SweepArm:
    """One temperature of a sweep: a plain run configuration."""

    temperature: float
    config: RunConfig

    @property
    def samples(self) -> int:
        return self.config.generation.samples

    @property
    def run_id(self) -> str:
        return self.config.resolved_run_id()


def is_sweep(config: RunConfig) -> bool:
    return config.generation.temperatures is not None


def arm_generation(generation: GenerationSettings, temperature: float) -> GenerationSettings:
    """The sweep's decoding at one temperature, validated as a plain run's would be."""
    fields = {name: getattr(generation, name) for name in GenerationSettings.model_fields}
    fields.update(
        temperature=temperature,
        temperatures=None,
        samples=generation.samples if temperature > 0 else 1,
    )
    try:
        return GenerationSettings.model_validate(fields)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigError(
            f"generation.temperatures: the arm at temperature {temperature} is not a valid "
            f"run: {problems}"
        ) from exc


def sweep_arms(config: RunConfig) -> list[SweepArm]:
    """One plain run per temperature of ``generation.temperatures``, in rising order."""
    temperatures = config.generation.temperatures
    if temperatures is None:
        raise ConfigError("generation.temperatures is not set: this configuration is no sweep")
    return [
        SweepArm(
            t,
            config.model_copy(
                update={"generation": arm_generation(config.generation, t), "run_id": None}
            ),
        )
        for t in temperatures
    ]


def sweep_id(config: RunConfig, arms: list[SweepArm] | None = None) -> str:
    """``run_id`` when given; else the preset and a hash of the arms' temperatures and run
    ids (the sweep config's own hash would not see ``samples`` while its base temperature is
    0, as a greedy configuration serialises without the sampling keys)."""
    if config.run_id:
        return config.run_id
    arms = sweep_arms(config) if arms is None else arms
    identity = "\n".join(f"{arm.temperature!r} {arm.run_id}" for arm in arms)
    return f"{config.preset}-sweep-{hashlib.sha256(identity.encode()).hexdigest()[:12]}"


def sweep_record(config: RunConfig) -> dict[str, Any]:
    """The sweep configuration as ``run_config.json`` holds it (``sago resume`` reads it
    back): the generation's sampling keys are kept even at a base temperature of 0, where
    the greedy serialisation would drop ``samples``, ``top_p``, ``top_k`` and ``seed``."""
    record: dict[str, Any] = config.model_dump(mode="json", by_alias=True)
    generation = dict(record.get("generation") or {})
    for key in SAMPLING_KEYS:
        generation.setdefault(key, getattr(config.generation, key))
    record["generation"] = generation
    return record
