"""Experiment trackers end to end: a real MLflow tracking server (sqlite store, local artifact
root, a free port, started once for the module) and W&B in offline mode, fed by two
demo-sized evaluations of two releases of one tiny random-weight model (same architecture,
different weights) with ``tracking`` on. Read back through ``MlflowClient`` and W&B's own
offline files: the parameters, one metric per (model, dataset, axis) equal to
summary.parquet's value, the report and card as artifacts, both releases in one experiment.
Then, with the server stopped, the same run finishes with one warning line."""

from __future__ import annotations

import importlib.metadata
import json
import logging
import shutil
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from sago_core.config import RunConfig, build_config
from sago_core.config.places import public_model
from tests.grids import noise_only
from tests.track_env import mlflow_server, require_track, stop, wandb_history

pytestmark = pytest.mark.slow


def _config(runs: Path, model: str, uri: str, wandb_dir: Path) -> RunConfig:
    return build_config(
        "demo",
        {
            "models": [model],
            "datasets": ["builtin"],
            "n": 2,
            "runs_dir": str(runs),
            "generation": {"max_new_tokens": 8},
            "variants": noise_only(),
            "tracking": {
                "mlflow": {"tracking_uri": uri, "timeout_s": 5},
                "wandb": {"mode": "offline", "dir": str(wandb_dir)},
            },
        },
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    require_track()
    with mlflow_server(tmp_path_factory.mktemp("mlflow")) as running:
        yield running


@pytest.fixture(scope="module")
def releases(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Release 1 is the tiny model; release 2 the same architecture with other weights."""
    import torch
    from transformers import LlamaForCausalLM

    second = tmp_path_factory.mktemp("tiny-llama-v2") / "model"
    shutil.copytree(tiny_model_dir, second)
    model = LlamaForCausalLM.from_pretrained(second)
    torch.manual_seed(1)
    with torch.no_grad():
        for weights in model.parameters():
            weights.add_(0.01 * torch.randn_like(weights))
    model.save_pretrained(second)
    return [f"hf:{tiny_model_dir}", f"hf:{second}"]


@pytest.fixture(scope="module")
def tracked(
    server: tuple[str, Any], releases: list[str], harness: None, tmp_path_factory: Any
) -> dict[str, Any]:
    from sago.flows.evaluate import evaluate

    uri, _ = server
    runs, wandb_dir = tmp_path_factory.mktemp("runs"), tmp_path_factory.mktemp("wandb")
    configs = [_config(runs, model, uri, wandb_dir) for model in releases]
    return {
        "uri": uri,
        "configs": configs,
        "runs": [Path(evaluate(config)) for config in configs],
        "wandb": wandb_dir,
    }


def _mlflow_run(uri: str, run_dir: Path) -> Any:
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    experiments = [e.experiment_id for e in client.search_experiments()]
    found = client.search_runs(experiments, f"tags.`sago.run_id` = '{run_dir.name}'")
    assert len(found) == 1, f"{len(found)} MLflow runs for {run_dir.name}"
    return found[0]


def _summary_sgs(run_dir: Path) -> dict[str, float]:
    summary = pl.read_parquet(run_dir / "summary.parquet").filter(pl.col("sgs").is_not_null())
    return {f"sgs/{r['dataset']}/{r['axis']}": r["sgs"] for r in summary.iter_rows(named=True)}


def test_mlflow_holds_params_metrics_and_files(tracked: dict[str, Any]) -> None:
    from mlflow import MlflowClient

    run_dir, config = tracked["runs"][0], tracked["configs"][0]
    logged = _mlflow_run(tracked["uri"], run_dir)
    params = logged.data.params
    assert params["run_id"] == run_dir.name
    assert params["model"] == public_model(config.models[0])  # a folder by its name
    assert params["sago_version"] == importlib.metadata.version("sago")
    assert params["config.n"] == "2"
    assert params["config.seed"] == "0"
    assert json.loads(params["config.models"]) == [public_model(config.models[0])]
    assert json.loads(params["config.variants.noise.spacing"]) == [5]
    assert "config.tracking.mlflow.tracking_uri" not in params  # where, not what

    expected = _summary_sgs(run_dir)
    assert len(expected) >= 3  # pooled and per dataset, on several axes
    sgs = {k: v for k, v in logged.data.metrics.items() if k.startswith("sgs/")}
    assert sgs == expected  # one metric per (dataset, axis), equal to summary.parquet

    artifacts = {a.path for a in MlflowClient(tracked["uri"]).list_artifacts(logged.info.run_id)}
    assert {"report.html", "card.md", "summary.parquet", "scores.parquet"} <= artifacts


def test_two_releases_land_in_one_experiment(tracked: dict[str, Any]) -> None:
    from mlflow import MlflowClient

    first, second = (_mlflow_run(tracked["uri"], run) for run in tracked["runs"])
    assert first.data.params["model_identity"] != second.data.params["model_identity"]
    assert first.info.experiment_id == second.info.experiment_id
    experiment = MlflowClient(tracked["uri"]).get_experiment(first.info.experiment_id)
    assert experiment.name.startswith("sago/arch:model_type=llama")


def test_wandb_offline_files_hold_the_metrics(tracked: dict[str, Any]) -> None:
    for run_dir in tracked["runs"]:
        (log,) = tracked["wandb"].glob(f"wandb/offline-run-*-{run_dir.name}-*/run-*.wandb")
        sgs = {k: v for k, v in wandb_history(log).items() if k.startswith("sgs/")}
        assert sgs == _summary_sgs(run_dir)
        assert (log.parent / "files" / "report.html").is_file()


def test_a_stopped_server_leaves_the_run_standing(
    tracked: dict[str, Any], server: tuple[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    """Runs last: it stops the module's server."""
    from sago.flows.evaluate import evaluate

    stop(server[1])
    with caplog.at_level(logging.WARNING, logger="sago.tracking"):
        assert Path(evaluate(tracked["configs"][0])) == tracked["runs"][0]
    warnings = [r.getMessage() for r in caplog.records if r.name == "sago.tracking"]
    assert len(warnings) == 1, warnings
    assert "not logged to mlflow" in warnings[0] and tracked["runs"][0].name in warnings[0]
