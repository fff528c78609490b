"""Log a finished run to MLflow: one MLflow run per (sago run, model), in the experiment
of the model's family unless the settings name one.

Only MLflow's client is used (``MlflowClient`` with the configured URI, never MLflow's
process-wide active run), so logging cannot leak into another library's MLflow state. A
server is asked for ``/health`` first with a short timeout: a server that is down costs
seconds, not the client's retry schedule. Logging the same sago run again (a rerun of a
finished run) writes into the MLflow run it made the first time.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import httpx

from sago_core.config.tracking import MlflowSettings
from sago_core.tracking.common import TrackerUnavailable, experiment_name
from sago_core.tracking.record import ModelRecord, RunRecord

if TYPE_CHECKING:
    from mlflow import MlflowClient

# MLflow's own limits on one log_batch call (params and metrics).
PARAMS_PER_BATCH = 100
METRICS_PER_BATCH = 1000
PARAM_VALUE_LIMIT = 6000


def _check_server(settings: MlflowSettings) -> None:
    uri = settings.tracking_uri
    if not uri.startswith(("http://", "https://")):
        return  # a file or database store: the client itself opens it
    try:
        answer = httpx.get(f"{uri.rstrip('/')}/health", timeout=settings.timeout_s)
    except httpx.HTTPError as exc:
        raise TrackerUnavailable(f"MLflow server {uri} did not answer ({exc})") from exc
    if answer.status_code != 200:
        raise TrackerUnavailable(f"MLflow server {uri} answered {answer.status_code}")


def _experiment_id(client: MlflowClient, name: str) -> str:
    found = client.get_experiment_by_name(name)
    if found is not None:
        return str(found.experiment_id)
    return str(client.create_experiment(name))


def _existing_run(client: MlflowClient, experiment_id: str, record: ModelRecord) -> str | None:
    """The MLflow run an earlier logging of this (sago run, model) made, if any."""
    run_id = record.tags["sago.run_id"].replace("'", "")
    model = record.tags["sago.model"].replace("'", "")
    query = f"tags.`sago.run_id` = '{run_id}' and tags.`sago.model` = '{model}'"
    runs = client.search_runs([experiment_id], filter_string=query, max_results=1)
    return str(runs[0].info.run_id) if runs else None


def log_model(client: MlflowClient, experiment_id: str, record: ModelRecord) -> str:
    """One model's parameters, metrics, tags and files; the MLflow run id."""
    from mlflow.entities import Metric, Param, RunTag

    mlflow_run = _existing_run(client, experiment_id, record)
    if mlflow_run is None:
        name = f"{record.tags['sago.run_id']} {record.model}"
        mlflow_run = str(client.create_run(experiment_id, run_name=name).info.run_id)
    now = int(time.time() * 1000)
    tags = [RunTag(k, v) for k, v in record.tags.items()]
    params = [Param(k, v[:PARAM_VALUE_LIMIT]) for k, v in sorted(record.params.items())]
    metrics = [Metric(k, v, now, 0) for k, v in sorted(record.metrics.items())]
    client.log_batch(mlflow_run, tags=tags)
    for start in range(0, len(params), PARAMS_PER_BATCH):
        client.log_batch(mlflow_run, params=params[start : start + PARAMS_PER_BATCH])
    for start in range(0, len(metrics), METRICS_PER_BATCH):
        client.log_batch(mlflow_run, metrics=metrics[start : start + METRICS_PER_BATCH])
    for path in record.files:
        client.log_artifact(mlflow_run, str(path))
    client.set_terminated(mlflow_run)
    return mlflow_run


def log_to_mlflow(run: RunRecord, settings: MlflowSettings) -> list[str]:
    """Every model of ``run``; the MLflow run ids. Raises ``TrackerUnavailable`` when the
    server is down, and whatever MLflow raises when it refuses (the caller warns)."""
    _check_server(settings)
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=settings.tracking_uri)
    logged = []
    for record in run.models:
        experiment = settings.experiment or experiment_name(record.tags["sago.model"])
        logged.append(log_model(client, _experiment_id(client, experiment), record))
    return logged
