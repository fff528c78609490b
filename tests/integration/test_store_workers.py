"""The production shape with no shared disk: a real Prefect server, two workers pinned to
fake devices, each on its own scratch folder (``SAGO_SCRATCH``), and the run's folder on a
real S3-compatible server (moto) on 127.0.0.1. The orchestrator and the workers share only
the bucket: workers fetch their shards' inputs from it and push what they made; the
orchestrator fetches the workers' shards back. Results equal an in-process local run."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_prefect_server import (
    _config,
    _sago,
    _setup_and_deploy,
    _worker,
    assert_equals_a_local_run,
)
from tests.prefect_server import prefect_server
from tests.storage.s3_server import create_bucket, s3_client, s3_server, store_environment

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A Prefect server and an S3 server; the environment every process here shares."""
    root = tmp_path_factory.mktemp("store-workers")
    with s3_server(root / "moto.log") as endpoint, prefect_server(root / "prefect") as env:
        create_bucket(endpoint, "sago-runs")
        yield {**env, **store_environment(endpoint), "SAGO_TEST_S3": endpoint}


def test_workers_that_share_no_directory_hand_their_shards_back_through_the_store(
    stores: dict[str, str], tiny_model_dir: Path, tmp_path: Path
) -> None:
    env = stores
    _setup_and_deploy(env)
    workers = [
        _worker({**env, "SAGO_SCRATCH": str(tmp_path / f"worker-{d}")}, d) for d in ("0", "1")
    ]
    settings = _config(tiny_model_dir, tmp_path / "unused", "deployments")
    settings["runs_dir"] = "s3://sago-runs/eval"
    config = tmp_path / "run.json"
    config.write_text(json.dumps(settings))
    try:
        done = _sago(
            {**env, "SAGO_SCRATCH": str(tmp_path / "orchestrator")}, "run", "--config", str(config)
        )
        assert done.returncode == 0, done.stderr[-4000:]
    finally:
        for worker in workers:
            os.killpg(worker.pid, signal.SIGTERM)
        for worker in workers:
            worker.wait(timeout=60)

    def run_folder(scratch: Path) -> Path:
        (mirror,) = list(scratch.iterdir())
        return next(p for p in mirror.iterdir() if p.is_dir() and not p.name.startswith("."))

    run_dir = run_folder(tmp_path / "orchestrator")
    # each worker made its own shards in its own scratch folder, and only those
    made = {
        d: {
            p.parent.name
            for p in run_folder(tmp_path / f"worker-{d}").glob("models/*/shards/*/worker.json")
        }
        for d in ("0", "1")
    }
    assert len(made["0"]) == len(made["1"]) == 3 and not made["0"] & made["1"]
    # the orchestrator has every shard, fetched from the store, none computed by itself
    served = [json.loads(p.read_text()) for p in run_dir.glob("models/*/shards/*/worker.json")]
    assert sorted(s["device"] for s in served) == ["0", "0", "0", "1", "1", "1"]
    keys = [
        o["Key"]
        for page in s3_client(env["SAGO_TEST_S3"])
        .get_paginator("list_objects_v2")
        .paginate(Bucket="sago-runs")
        for o in page.get("Contents", [])
    ]
    assert f"eval/{run_dir.name}/summary.parquet" in keys
    assert sum(k.endswith("/worker.json") for k in keys) == 6

    assert_equals_a_local_run(env, tiny_model_dir, tmp_path, run_dir)
