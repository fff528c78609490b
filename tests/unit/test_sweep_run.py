"""``sago run`` with ``generation.temperatures``: the dry run plans each
arm under the plain run's id, and a sweep runs its arms in rising temperature, then writes
its configuration, page and card in its own folder (the arms' flow stood in for by a
function that writes an arm's summary, as ``run_sweep`` takes the evaluation as a value)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from sago_cli.main import main
from sago_cli.run import run_sweep
from sago_core.artifacts.layout import RunLayout
from sago_core.config import RunConfig, build_config

SETTINGS = {"models": ["mock:echo"], "n": 1}
SWEEP = {"generation": {"temperatures": [0.7, 0], "samples": 4}}


def test_the_dry_run_plans_every_arm_under_its_plain_run_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(json.dumps({**SETTINGS, **SWEEP}))  # JSON is YAML
    assert main(["run", "--config", str(path), "--runs-dir", str(tmp_path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    greedy = build_config("demo", SETTINGS).resolved_run_id()
    sampled = build_config("demo", {**SETTINGS, "generation": {"temperature": 0.7, "samples": 4}})
    assert out.startswith("Temperature sweep demo-sweep-")
    assert out.index(f"Plan for run {greedy}") < out.index(
        f"Plan for run {sampled.resolved_run_id()}"
    )
    assert "Arm T 0 (K 1):" in out and "Arm T 0.7 (K 4):" in out
    assert not list(tmp_path.glob("demo-*")), "a dry run writes no run folder"


def test_a_sweep_runs_its_arms_then_writes_its_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = build_config("demo", {**SETTINGS, **SWEEP}, {"runs_dir": tmp_path})
    ran: list[RunConfig] = []

    def evaluate_arm(arm: RunConfig) -> Path:
        ran.append(arm)
        run_dir = RunLayout.of(arm.runs_dir, arm.resolved_run_id()).run_dir
        run_dir.mkdir(parents=True)
        sgs = 0.2 + arm.generation.temperature
        pl.DataFrame(
            {"model": ["mock:echo"], "dataset": ["__pooled__"], "axis": ["bleu"], "sgs": [sgs],
             "ci_low": [sgs - 0.1], "ci_high": [sgs + 0.1], "n": [6], "missing_reason": [None],
             "ci_missing_reason": [None]}
        ).write_parquet(run_dir / "summary.parquet")  # fmt: skip
        return run_dir

    paths = run_sweep(config, evaluate_arm)
    assert [a.generation.temperature for a in ran] == [0.0, 0.7]
    assert ran[0].resolved_run_id() == build_config("demo", SETTINGS).resolved_run_id()
    sweep_dir = paths[0].parent
    assert sweep_dir.parent == tmp_path.resolve() and sweep_dir.name.startswith("demo-sweep-")
    assert [p.name for p in paths] == [
        "sweep.parquet",
        "sweep.html",
        "card.md",
        "card.html",
        "card.json",
    ]
    saved = json.loads((sweep_dir / "run_config.json").read_text())
    assert RunConfig.model_validate(saved) == config  # what sago resume runs again
    table = pl.read_parquet(sweep_dir / "sweep.parquet")
    assert table["temperature"].to_list() == [0.0, 0.7]
    assert table["sgs"].to_list() == pytest.approx([0.2, 0.9])
    assert table["run_id"].to_list() == [a.resolved_run_id() for a in ran]
    assert (
        "| 0.7 | 4 | sgs_excess | 0.9000 [0.8000, 1.0000] |" in (sweep_dir / "card.md").read_text()
    )
    assert "Arm T 0.7 (K 4)" in capsys.readouterr().out
