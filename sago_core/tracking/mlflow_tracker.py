"""Log a finished run to MLflow: one MLflow run per (sago run, model), in the experiment
of the model's family unless the settings name one.

Only MLflow's client is used (``MlflowClient`` with the configured URI, never MLflow's
process-wide active run), so logging cannot leak into another library's MLflow state. A
server is asked for ``/health`` first with a short timeout: a server that is down costs
seconds, not the client's retry schedule, and the client's own calls get the same timeout
and one retry. Logging the same sago run again (a rerun of a finished run) writes into the
MLflow run it made the first time, unless a parameter changed (a new sago version, say):
MLflow refuses to change a logged parameter, so that logging gets a new MLflow run with the
same tags.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import httpx

from sago_core.config.places import public_url
from sago_core.config.tracking import MlflowSettings
from sago_core.tracking.common import TrackerUnavailable, experiment_name
from sago_core.tracking.record import ModelRecord, RunRecord

if TYPE_CHECKING:
    from mlflow import MlflowClient
    from mlflow.entities import Run

# MLflow's own limits on one log_batch call (params and metrics).
PARAMS_PER_BATCH = 100
METRICS_PER_BATCH = 1000
PARAM_VALUE_LIMIT = 6000
# A server behind a login answers /health with these: it is up, the client logs in.
AUTH_STATUSES = (401, 403)
CLIENT_MAX_RETRIES = 1


def _check_server(settings: MlflowSettings) -> None:
    uri = settings.tracking_uri
    if not uri.startswith(("http://", "https://")):
        return  # a file or database store: the client itself opens it
    shown = public_url(uri)  # a warning line never carries the URI's password
    try:
        answer = httpx.get(f"{uri.rstrip('/')}/health", timeout=settings.timeout_s)
    except httpx.HTTPError as exc:
        raise TrackerUnavailable(f"MLflow server {shown} did not answer ({exc})") from exc
    if answer.status_code != 200 and answer.status_code not in AUTH_STATUSES:
        raise TrackerUnavailable(f"MLflow server {shown} answered {answer.status_code}")


@contextmanager
def _client_limits(settings: MlflowSettings) -> Iterator[None]:
    """MLflow's client reads its timeout and retries from the environment (by default
    two minutes and seven retries a call): ``timeout_s`` and one retry while sago logs, the
    process's own values after."""
    limits = {
        "MLFLOW_HTTP_REQUEST_TIMEOUT": str(max(1, math.ceil(settings.timeout_s))),
        "MLFLOW_HTTP_REQUEST_MAX_RETRIES": str(CLIENT_MAX_RETRIES),
    }
    before = {name: os.environ.get(name) for name in limits}
    os.environ.update(limits)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _experiment_id(client: MlflowClient, name: str) -> str:
    found = client.get_experiment_by_name(name)
    if found is not None:
        return str(found.experiment_id)
    return str(client.create_experiment(name))


def _existing_run(client: MlflowClient, experiment_id: str, record: ModelRecord) -> Run | None:
    """The latest MLflow run an earlier logging of this (sago run, model) made, if any."""
    run_id = record.tags["sago.run_id"].replace("'", "")
    model = record.tags["sago.model"].replace("'", "")
    query = f"tags.`sago.run_id` = '{run_id}' and tags.`sago.model` = '{model}'"
    runs = client.search_runs(
        [experiment_id],
        filter_string=query,
        max_results=1,
        order_by=["attributes.start_time DESC"],
    )
    return runs[0] if runs else None


def _reusable(existing: Run | None, params: dict[str, str]) -> str | None:
    """The existing run's id when it can take ``params`` (none it holds differs)."""
    if existing is None:
        return None
    logged = existing.data.params
    if any(logged.get(key, value) != value for key, value in params.items()):
        return None
    return str(existing.info.run_id)


def log_model(client: MlflowClient, experiment_id: str, record: ModelRecord) -> str:
    """One model's parameters, metrics, tags and files; the MLflow run id."""
    from mlflow.entities import Metric, Param, RunTag

    values = {k: v[:PARAM_VALUE_LIMIT] for k, v in sorted(record.params.items())}
    mlflow_run = _reusable(_existing_run(client, experiment_id, record), values)
    if mlflow_run is None:
        name = f"{record.tags['sago.run_id']} {record.tags['sago.model']}"
        mlflow_run = str(client.create_run(experiment_id, run_name=name).info.run_id)
    now = int(time.time() * 1000)
    tags = [RunTag(k, v) for k, v in record.tags.items()]
    params = [Param(k, v) for k, v in values.items()]
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
    with _client_limits(settings):
        for record in run.models:
            experiment = settings.experiment or experiment_name(record.model)
            logged.append(log_model(client, _experiment_id(client, experiment), record))
    return logged
