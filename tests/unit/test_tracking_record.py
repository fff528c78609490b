"""The tracking section and what a tracker is told, without a tracker: the section stays out
of the run id and cache keys and is strict; ``--track`` values parse to it; a hand-written
run folder reads to one record per model whose metrics are summary.parquet's non-null values
(null ones are left to the run's own tables); and a tracker that is down costs one warning
line and no exception (a closed port: refused at once)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from sago_core.artifacts.schemas import PAIRED, SUMMARY
from sago_core.artifacts.store import write_parquet
from sago_core.config import build_config
from sago_core.config.tracking import TrackingSettings, track_option
from sago_core.errors import ConfigError
from sago_core.tracking import track_run
from sago_core.tracking.record import read_run
from tests.prefect_server import free_port

MODELS = ("hf:smollm2-135m", "litellm:openai/gpt-4o-mini")


def test_tracking_is_where_not_what() -> None:
    plain = build_config("demo")
    tracked = build_config("demo", {"tracking": {"mlflow": {"tracking_uri": "http://h:5000"}}})
    assert tracked.resolved_run_id() == plain.resolved_run_id()
    assert "tracking" not in plain.model_dump(mode="json")
    assert tracked.tracking is not None and tracked.tracking.mlflow is not None
    assert tracked.tracking.mlflow.experiment is None  # default: the model's family


@pytest.mark.parametrize(
    ("section", "named"),
    [
        ({"mlflow": {"tracking_uri": "http://h", "experimnt": "x"}}, "experimnt"),
        ({}, "names no tracker"),
        ({"wandb": {"mode": "sometimes"}}, "mode"),
    ],
)
def test_the_section_is_strict(section: dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        build_config("demo", {"tracking": section})


def test_track_option_values() -> None:
    assert track_option(["http://127.0.0.1:5000", "wandb"]) == {
        "mlflow": {"tracking_uri": "http://127.0.0.1:5000"},
        "wandb": {},
    }
    assert track_option(["mlflow=file:./mlruns", "wandb=team-evals"]) == {
        "mlflow": {"tracking_uri": "file:./mlruns"},
        "wandb": {"project": "team-evals"},
    }
    with pytest.raises(ConfigError, match="--track 'tensorboard'"):
        track_option(["tensorboard"])


def _summary_row(model: str, dataset: str, axis: str, sgs: float | None) -> dict[str, Any]:
    row: dict[str, Any] = {c: None for c in SUMMARY}
    row.update(model=model, dataset=dataset, axis=axis, sgs=sgs, n=3)
    if sgs is None:
        row["missing_reason"] = "external generations: no model given"
    else:
        row.update(ci_low=sgs / 2, ci_high=sgs * 2, p_reference=0.03125, floor=0.0625)
    return row


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "runs" / "demo-abc"
    rows = [
        _summary_row(MODELS[0], "__pooled__", "bleu", 0.5),
        _summary_row(MODELS[0], "__pooled__", "act", 0.25),
        _summary_row(MODELS[1], "__pooled__", "bleu", 0.75),
        _summary_row(MODELS[1], "__pooled__", "act", None),
    ]
    write_parquet(pl.DataFrame(rows, schema=SUMMARY), folder / "summary.parquet", SUMMARY)
    manifest = {
        "config": {
            "models": list(MODELS),
            "seed": 7,
            "variants": {"noise": {"spacing": [5]}},
            "runs_dir": "/somewhere/runs",
            "tracking": {"mlflow": {"tracking_uri": "http://h"}},
        },
        "config_hash": "abc",
        "packages": {"sago": "0.1.0"},
    }
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    (folder / "report.html").write_text("<html></html>", encoding="utf-8")
    return folder


def test_a_record_per_model_with_the_summary_values(run_dir: Path) -> None:
    record = read_run(run_dir)
    assert record.run_id == "demo-abc"
    assert [m.model for m in record.models] == list(MODELS)
    first, second = record.models
    assert first.metrics["sgs/__pooled__/bleu"] == 0.5
    assert first.metrics["ci_high/__pooled__/act"] == 0.5
    assert first.metrics["p_reference/__pooled__/bleu"] == 0.03125
    assert first.metrics["floor/__pooled__/bleu"] == 0.0625
    assert second.metrics["sgs/__pooled__/bleu"] == 0.75
    assert "sgs/__pooled__/act" not in second.metrics  # null: not logged
    assert second.metrics["n/__pooled__/act"] == 3
    params = first.params
    assert (params["config.seed"], params["config.variants.noise.spacing"]) == ("7", "[5]")
    assert json.loads(params["config.models"]) == list(MODELS)
    assert (params["run_id"], params["sago_version"], params["model"]) == (
        "demo-abc",
        "0.1.0",
        MODELS[0],
    )
    assert not any(k.startswith(("config.runs_dir", "config.tracking")) for k in params)
    assert [p.name for p in first.files] == ["report.html", "summary.parquet", "manifest.json"]


def test_a_tracker_that_is_down_costs_one_warning_line(
    run_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = TrackingSettings.model_validate(
        {"mlflow": {"tracking_uri": f"http://127.0.0.1:{free_port()}", "timeout_s": 2}}
    )
    with caplog.at_level(logging.WARNING, logger="sago.tracking"):
        (outcome,) = track_run(run_dir, settings)
    assert outcome.tracker == "mlflow" and outcome.logged == ()
    lines = [r.getMessage() for r in caplog.records if r.name == "sago.tracking"]
    assert lines == [outcome.warning]
    assert "run demo-abc not logged to mlflow" in lines[0] and "did not answer" in lines[0]


def test_a_paired_comparison_logs_its_verdicts(tmp_path: Path) -> None:
    def row(dataset: str, axis: str, diff: float, verdict: str) -> dict[str, Any]:
        values: dict[str, Any] = {c: None for c in PAIRED}
        values.update(model_a=MODELS[0], model_b=MODELS[1], run_a="run-a", run_b="run-b")
        values.update(dataset=dataset, axis=axis, n=4, mean_diff=diff, verdict=verdict)
        values.update(p_paired_t=0.015625, margin=0.05)
        return values

    rows = [
        row("__pooled__", "bleu", 0.25, "b_worse"),
        row("__pooled__", "act", 0.0, "inconclusive"),
    ]
    table = write_parquet(pl.DataFrame(rows, schema=PAIRED), tmp_path / "paired.parquet", PAIRED)
    (tmp_path / "paired.md").write_text("| table |", encoding="utf-8")
    (record,) = read_run(table).models
    assert record.metrics["mean_diff/__pooled__/bleu"] == 0.25
    assert record.metrics["p_paired_t/__pooled__/act"] == 0.015625
    assert record.metrics["verdict/__pooled__/bleu"] == 1.0
    assert "verdict/__pooled__/act" not in record.metrics  # inconclusive: the table keeps it
    assert (record.params["run_a"], record.params["run_b"]) == ("run-a", "run-b")
    assert record.tags["sago.run_id"] == "run-a vs run-b"
    assert [p.name for p in record.files] == ["paired.parquet", "paired.md"]
