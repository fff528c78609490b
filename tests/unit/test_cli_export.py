"""``sago export`` has one subcommand per kind of output, each reading a run the same way;
on a saved run folder (the fixture from before the regrouping) the inspect logs and the
leaderboard layout are written where ``--out`` says, and ``sago run --track`` fills the
config's tracking section."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from sago_cli.main import build_parser, main
from sago_cli.run import config_from_args

SAVED = Path(__file__).resolve().parents[1] / "fixtures" / "runs_before_renames" / "legacy-a"


def test_export_inspect_writes_one_log_per_model_and_dataset(tmp_path: Path) -> None:
    out = tmp_path / "logs"
    assert main(["export", "inspect", str(SAVED), "--out", str(out)]) == 0
    logs = sorted(out.iterdir())
    datasets = set(pl.read_parquet(SAVED / "prompts.parquet")["dataset"])
    assert len(logs) == len(datasets) == 6  # one model (mock:release-a) x the built-in six
    assert {json.loads(p.read_text())["eval"]["model"] for p in logs} == {"mock:release-a"}


def test_export_hf_results_writes_the_leaderboard_layout(tmp_path: Path) -> None:
    out = tmp_path / "results"
    assert main(["export", "hf-results", str(SAVED), "--out", str(out)]) == 0
    assert (out / "README.md").is_file() and list((out / "results").rglob("results_*.json"))


def test_an_export_folder_with_a_suffix_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["export", "inspect", str(SAVED), "--out", "logs.json"])
    assert "name a folder (no suffix)" in capsys.readouterr().err


def test_track_fills_the_tracking_section() -> None:
    args = build_parser().parse_args(
        ["run", "--track", "http://127.0.0.1:5000", "--track", "wandb=team", "--dry-run"]
    )
    tracking = config_from_args(args).tracking
    assert tracking is not None and tracking.mlflow is not None and tracking.wandb is not None
    assert tracking.mlflow.tracking_uri == "http://127.0.0.1:5000"
    assert tracking.wandb.project == "team"
