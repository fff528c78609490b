"""A temperature sweep's arms: each arm is a plain run, and the T = 0 arm
is the very run (run id, result hash) a plain greedy run of the same settings is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sago_core.config import RunConfig, build_config
from sago_core.errors import ConfigError
from sago_core.sweep import sweep_arms, sweep_id, sweep_record

SWEEP = {"generation": {"temperatures": [0.7, 0, 0.3], "samples": 4, "top_p": 0.9}}


def test_arms_are_plain_runs_and_the_greedy_arm_is_the_plain_greedy_run() -> None:
    arms = sweep_arms(build_config("demo", SWEEP))
    assert [a.temperature for a in arms] == [0.0, 0.3, 0.7]
    assert [a.samples for a in arms] == [1, 4, 4]
    plain_greedy = build_config("demo", {})
    assert arms[0].run_id == plain_greedy.resolved_run_id()
    assert arms[0].config.result_hash() == plain_greedy.result_hash()
    sampled = build_config("demo", {"generation": {"temperature": 0.7, "samples": 4, "top_p": 0.9}})
    assert arms[2].run_id == sampled.resolved_run_id()
    assert len({a.run_id for a in arms}) == 3
    for arm in arms:
        assert arm.config.generation.temperatures is None
        assert arm.config.generation.temperature == arm.temperature


def test_a_sweeps_run_id_names_its_folder_never_its_arms() -> None:
    named = build_config("demo", SWEEP, {"run_id": "my-sweep"})
    assert sweep_id(named) == "my-sweep"
    arms = sweep_arms(named)
    assert arms[0].run_id == build_config("demo", {}).resolved_run_id()


def test_the_sweep_id_changes_with_k_though_the_base_temperature_is_zero() -> None:
    eight = {"generation": {**SWEEP["generation"], "samples": 8}}
    first, second = build_config("demo", SWEEP), build_config("demo", eight)
    assert sweep_id(first) != sweep_id(second)
    assert sweep_id(first) == sweep_id(build_config("demo", SWEEP))
    assert sweep_id(first).startswith("demo-sweep-")


def test_the_saved_sweep_reads_back_with_its_samples(tmp_path: Path) -> None:
    config = build_config("demo", SWEEP)
    path = tmp_path / "run_config.json"
    path.write_text(json.dumps(sweep_record(config)))
    again = RunConfig.model_validate(json.loads(path.read_text()))
    assert again.generation.samples == 4 and again.generation.top_p == 0.9
    assert [a.run_id for a in sweep_arms(again)] == [a.run_id for a in sweep_arms(config)]


def test_an_arm_that_is_no_valid_run_is_refused_naming_the_sweep() -> None:
    """T > 0 with use_model_defaults: refused at parse or at the arm's expansion, before any
    run starts, naming the sweep and the conflicting key either way."""
    with pytest.raises(ConfigError, match=r"generation\.temperatures.*use_model_defaults"):
        sweep_arms(
            build_config(
                "demo", {"generation": {"temperatures": [0, 0.7], "use_model_defaults": True}}
            )
        )
