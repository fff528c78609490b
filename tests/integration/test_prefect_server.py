"""Production shape on this machine: a real Prefect server on 127.0.0.1 (temporary home and
database), a `gpu` process work pool with two workers pinned to fake devices
(CUDA_VISIBLE_DEVICES=0 and 1, CPU backend), `prefect deploy` from deployments/prefect.yaml,
and evaluations whose shards go through the `sago-shard` deployment. One server, one
deployment and one pair of workers serve the module (each worker on its own scratch folder,
``SAGO_SCRATCH``, used only when the run's folder is on an object store); the kill test runs
last and kills and restarts device 1's worker.

- Shared disk: shards are spread over both workers, and results equal an in-process run.
- No shared disk: the run's folder is on a real S3-compatible server (moto) on 127.0.0.1;
  the orchestrator and the workers share only the bucket: workers fetch their shards'
  inputs from it and push what they made; the orchestrator fetches the workers' shards
  back. Results equal the same in-process run.
- A worker killed mid-run: its flow run is crashed by the dead-worker automation, the run
  stops, and `sago resume` recomputes only the killed worker's unfinished shards."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tests.manifests import generate_cache_hits
from tests.prefect_server import ROOT, prefect_server, run_sago
from tests.storage.s3_server import create_bucket, s3_client, s3_server, store_environment

pytestmark = pytest.mark.slow
PREFECT = str(Path(sys.executable).with_name("prefect"))
QUESTIONS = (
    "What is the boiling point of water at sea level?",
    "Who wrote the novel Pride and Prejudice?",
    "How many legs does a spider have?",
    "Which planet is known as the red planet?",
    "What is the largest ocean on Earth?",
    "How many days are there in a leap year?",
    "What gas do plants take in from the air?",
    "Who painted the Mona Lisa?",
)
SPREAD_N = 2  # one shard per device: enough to show the spread


@dataclass
class Cluster:
    env: dict[str, str]
    workers: dict[str, subprocess.Popen]
    root: Path
    data: Path

    def scratch(self, device: str) -> Path:
        return self.root / f"worker-{device}"

    def start_worker(self, device: str) -> None:
        self.workers[device] = _worker(
            {**self.env, "SAGO_SCRATCH": str(self.scratch(device))}, device
        )


def _config(tiny: Path, data: Path, runs: Path | str, mode: str, n: int = SPREAD_N) -> dict:
    return {
        "models": [f"hf:{tiny}"],
        "datasets": [str(data)],
        "n": n,
        "runs_dir": str(runs),
        "generation": {"max_new_tokens": 4, "batch_size": 16},
        "orchestration": {"shard_size": 1, "mode": mode, "devices": 2},
        "variants": {
            "register": {"strengths": [2], "positions": ["suffix"]},
            "noise": {"spacing": [5], "punctuation": [3], "capitalization": [50]},
            "structural": None,
        },
    }


_sago = run_sago  # the sago command line in a fresh process, talking to the test's server


def _prefect(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [PREFECT, "--no-prompt", *args], env=env, cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, f"prefect {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


HEARTBEAT_S = 30  # a flow run's heartbeat (Prefect's least); the dead-worker automation
SILENCE_S = 75  # waits 2.5 beats


def _worker(env: dict[str, str], device: str) -> subprocess.Popen:
    return subprocess.Popen(
        [PREFECT, "worker", "start", "--pool", "gpu", "--work-queue", f"device-{device}"],
        env={
            **env,
            "CUDA_VISIBLE_DEVICES": device,
            "PREFECT_FLOWS_HEARTBEAT_FREQUENCY": str(HEARTBEAT_S),
            "PREFECT_WORKER_QUERY_SECONDS": "5",  # picks a shard run up sooner than 10 s
        },
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _stop(worker: subprocess.Popen) -> None:
    if worker.poll() is None:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=60)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A Prefect server (pools, queues, automation and deployments set up) and an S3 server;
    two workers, one per device queue. Every process here shares the environment."""
    root = tmp_path_factory.mktemp("cluster")
    data = root / "questions.jsonl"
    data.write_text("".join(json.dumps({"question": q}) + "\n" for q in QUESTIONS))
    with s3_server(root / "moto.log") as endpoint, prefect_server(root / "prefect") as env:
        create_bucket(endpoint, "sago-runs")
        env = {**env, **store_environment(endpoint), "SAGO_TEST_S3": endpoint}
        setup = _sago(env, "server-setup", "--devices", "2", "--silence", str(SILENCE_S))
        assert setup.returncode == 0, setup.stderr[-3000:]
        _prefect(env, "deploy", "--all", "--prefect-file", "deployments/prefect.yaml")
        cluster = Cluster(env, {}, root, data)
        try:
            for device in ("0", "1"):
                cluster.start_worker(device)
            yield cluster
        finally:
            for worker in cluster.workers.values():
                _stop(worker)


@pytest.fixture(scope="module")
def local_run(cluster: Cluster, tiny_model_dir: Path) -> Path:
    """The spread runs' configuration on local disk, orchestration ``local`` (no deployment,
    no work pool; it reports to the module's server): the run folder every deployment run
    here must equal."""
    runs = cluster.root / "local"
    config = cluster.root / "local.json"
    config.write_text(json.dumps(_config(tiny_model_dir, cluster.data, runs, "local")))
    local = _sago(cluster.env, "run", "--config", str(config))
    assert local.returncode == 0, local.stderr[-4000:]
    return next(p for p in runs.iterdir() if (p / "manifest.json").exists())


def assert_equals_a_local_run(run_dir: Path, local_dir: Path) -> None:
    """The same configuration run locally on local disk gives the same results."""
    key = ["dataset", "prompt_id", "variant_id"]
    a = pl.read_parquet(run_dir / "generations.parquet").sort(key).drop("engine")
    b = pl.read_parquet(local_dir / "generations.parquet").sort(key).drop("engine")
    assert a.equals(b)
    sa = pl.read_parquet(run_dir / "summary.parquet").sort("dataset", "axis")
    sb = pl.read_parquet(local_dir / "summary.parquet").sort("dataset", "axis")
    np.testing.assert_allclose(sa["sgs"].to_numpy(), sb["sgs"].to_numpy(), rtol=1e-5, atol=1e-7)


def test_shards_spread_over_two_pinned_workers_and_match_an_in_process_run(
    cluster: Cluster, local_run: Path, tiny_model_dir: Path, tmp_path: Path
) -> None:
    env = cluster.env
    deployments = _prefect(env, "deployment", "ls")
    for name in ("sago-evaluate-models", "sago-shard", "sago-watch"):
        assert name in deployments

    config = tmp_path / "run.json"
    settings = _config(tiny_model_dir, cluster.data, tmp_path / "runs", "deployments")
    config.write_text(json.dumps(settings))
    done = _sago(env, "run", "--config", str(config))
    assert done.returncode == 0, done.stderr[-4000:]

    run_dir = next(p for p in (tmp_path / "runs").iterdir() if (p / "manifest.json").exists())
    served = [json.loads(p.read_text()) for p in run_dir.glob("models/*/shards/*/worker.json")]
    assert len(served) == SPREAD_N  # one prompt per shard
    devices = [s["device"] for s in served]
    assert sorted(devices) == ["0", "1"]  # one shard on each device
    assert len({s["pid"] for s in served}) == 2  # one process per device served its shards
    assert_equals_a_local_run(run_dir, local_run)


def test_workers_that_share_no_directory_hand_their_shards_back_through_the_store(
    cluster: Cluster, local_run: Path, tiny_model_dir: Path, tmp_path: Path
) -> None:
    env = cluster.env
    settings = _config(tiny_model_dir, cluster.data, "s3://sago-runs/eval", "deployments")
    config = tmp_path / "run.json"
    config.write_text(json.dumps(settings))
    done = _sago(
        {**env, "SAGO_SCRATCH": str(tmp_path / "orchestrator")}, "run", "--config", str(config)
    )
    assert done.returncode == 0, done.stderr[-4000:]

    def run_folder(scratch: Path) -> Path:
        (mirror,) = list(scratch.iterdir())
        return next(p for p in mirror.iterdir() if p.is_dir() and not p.name.startswith("."))

    run_dir = run_folder(tmp_path / "orchestrator")
    # each worker made its own shard in its own scratch folder, and only that one
    made = {
        d: {
            p.parent.name
            for p in run_folder(cluster.scratch(d)).glob("models/*/shards/*/worker.json")
        }
        for d in ("0", "1")
    }
    assert len(made["0"]) == len(made["1"]) == 1 and not made["0"] & made["1"]
    # the orchestrator has every shard, fetched from the store, none computed by itself
    served = [json.loads(p.read_text()) for p in run_dir.glob("models/*/shards/*/worker.json")]
    assert sorted(s["device"] for s in served) == ["0", "1"]
    keys = [
        o["Key"]
        for page in s3_client(env["SAGO_TEST_S3"])
        .get_paginator("list_objects_v2")
        .paginate(Bucket="sago-runs")
        for o in page.get("Contents", [])
    ]
    assert f"eval/{run_dir.name}/summary.parquet" in keys
    assert sum(k.endswith("/worker.json") for k in keys) == SPREAD_N

    assert_equals_a_local_run(run_dir, local_run)


def _kill_tree(root: int) -> None:
    """SIGKILL a process and every descendant (a worker may start runs in new sessions)."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    doomed, frontier = [], [root]
    while frontier:
        pid = frontier.pop()
        doomed.append(pid)
        frontier.extend(parents.get(pid, []))
    for pid in doomed:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _committed_generations(run_dir: Path) -> set[str]:
    """The shards whose generate stage returned: its result record names the artifact."""
    named = (
        json.loads(json.loads(p.read_text())["result"])
        for p in (run_dir / ".prefect-results").glob("generate-*")
    )
    return {Path(path).parent.name for path in named if path.endswith("generations.parquet")}


def test_a_worker_killed_mid_run_is_crashed_and_resume_recomputes_only_its_shards(
    cluster: Cluster, tiny_model_dir: Path, tmp_path: Path
) -> None:
    """The module's server, deployment and workers (the tests above are done with them)."""
    env = cluster.env
    settings = _config(tiny_model_dir, Path(), tmp_path / "runs", "deployments", n=1)
    del settings["datasets"]  # the built-in prompts: 6 shards, 3 per device
    settings["generation"]["max_new_tokens"] = 24
    config = tmp_path / "run.json"
    config.write_text(json.dumps(settings))
    workers = cluster.workers
    run = subprocess.Popen(
        [sys.executable, "-m", "sago_cli", "run", "--config", str(config)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.time() + 600
        while time.time() < deadline:  # kill device-1's worker after its first shard
            served = [
                json.loads(p.read_text())
                for p in (tmp_path / "runs").glob("*/models/*/shards/*/worker.json")
            ]
            if any(s["device"] == "1" for s in served):
                break
            assert run.poll() is None, run.stderr.read() if run.stderr else ""
            time.sleep(0.2)
        _kill_tree(workers["1"].pid)  # the worker and the flow-run process it started
        workers["1"].wait()
        run_dir = next(
            p for p in (tmp_path / "runs").iterdir() if p.is_dir() and p.name != ".cache"
        )
        _, err = run.communicate(timeout=SILENCE_S + 300)
        written = {p.parent.name for p in run_dir.glob("models/*/shards/*/generations.parquet")}
        finished = _committed_generations(run_dir)
        # The kill may land between a shard's atomic artifact and its result record: that
        # shard did not finish (its stage never returned) and is computed again, at most one.
        assert finished <= written and len(written - finished) <= 1, (written, finished)
        assert run.returncode != 0 and "did not complete" in err, err[-3000:]
        assert "Crashed" in err  # the automation marked the silent run crashed
        assert not list(run_dir.rglob("*.tmp"))
        cluster.start_worker("1")
        resumed = _sago(env, "resume", str(run_dir))
        assert resumed.returncode == 0, resumed.stderr[-4000:]
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    hits = generate_cache_hits(run_dir)
    assert len(hits) == 6
    recomputed = {label for label, hit in hits.items() if not hit}
    assert recomputed == set(hits) - finished  # only what the kill left unfinished ...
    assert 0 < len(recomputed) <= 3  # at most the killed worker's share
    devices = {
        p.parent.name: json.loads(p.read_text())["device"]
        for p in run_dir.glob("models/*/shards/*/worker.json")
    }
    assert {devices[label] for label in recomputed} == {"1"}  # ... all of the killed worker
    print(f"shards: 6, finished before resume {len(finished)}, recomputed {len(recomputed)}")
