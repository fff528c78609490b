"""Production shape on this machine: a real Prefect server on 127.0.0.1 (temporary home and
database), a `gpu` process work pool with two workers pinned to fake devices
(CUDA_VISIBLE_DEVICES=0 and 1, CPU backend), `prefect deploy` from deployments/prefect.yaml,
and an evaluation whose shards go through the `sago-shard` deployment. Checks: shards are
spread over both workers, and results equal an in-process run."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tests.manifests import generate_cache_hits
from tests.prefect_server import ROOT, prefect_server, run_sago

pytestmark = pytest.mark.slow
PREFECT = str(Path(sys.executable).with_name("prefect"))


def _config(tiny: Path, runs: Path, mode: str) -> dict:
    return {
        "models": [f"hf:{tiny}"],
        "n": 1,
        "runs_dir": str(runs),
        "generation": {"max_new_tokens": 4, "batch_size": 16},
        "orchestration": {"shard_size": 1, "mode": mode, "devices": 2},
        "variants": {
            "register": {"strengths": [2], "positions": ["suffix"]},
            "noise": {"spacing": [5], "punctuation": [3], "capitalization": [50]},
            "structural": None,
        },
    }


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    with prefect_server(tmp_path_factory.mktemp("prefect-server")) as env:
        yield env


_sago = run_sago  # the sago command line in a fresh process, talking to the test's server


def _prefect(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [PREFECT, "--no-prompt", *args], env=env, cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, f"prefect {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


SILENCE_S = 75  # the dead-worker automation; workers beat every 30 s


def _setup_and_deploy(env: dict[str, str]) -> None:
    setup = _sago(env, "server-setup", "--devices", "2", "--silence", str(SILENCE_S))
    assert setup.returncode == 0, setup.stderr[-3000:]
    _prefect(env, "deploy", "--all", "--prefect-file", "deployments/prefect.yaml")


def _worker(env: dict[str, str], device: str) -> subprocess.Popen:
    return subprocess.Popen(
        [PREFECT, "worker", "start", "--pool", "gpu", "--work-queue", f"device-{device}"],
        env={**env, "CUDA_VISIBLE_DEVICES": device, "PREFECT_FLOWS_HEARTBEAT_FREQUENCY": "30"},
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def test_shards_spread_over_two_pinned_workers_and_match_an_in_process_run(
    server: dict[str, str], tiny_model_dir: Path, tmp_path: Path
) -> None:
    env = server
    _setup_and_deploy(env)
    deployments = _prefect(env, "deployment", "ls")
    for name in ("sago-evaluate-models", "sago-shard", "sago-watch"):
        assert name in deployments

    workers = [_worker(env, d) for d in ("0", "1")]
    try:
        config = tmp_path / "run.json"
        config.write_text(json.dumps(_config(tiny_model_dir, tmp_path / "runs", "deployments")))
        done = _sago(env, "run", "--config", str(config))
        assert done.returncode == 0, done.stderr[-4000:]
    finally:
        for worker in workers:
            os.killpg(worker.pid, signal.SIGTERM)
        for worker in workers:
            worker.wait(timeout=60)

    run_dir = next(p for p in (tmp_path / "runs").iterdir() if (p / "manifest.json").exists())
    served = [json.loads(p.read_text()) for p in run_dir.glob("models/*/shards/*/worker.json")]
    assert len(served) == 6  # one prompt per built-in style, one shard each
    devices = [s["device"] for s in served]
    assert sorted(set(devices)) == ["0", "1"] and devices.count("0") == devices.count("1") == 3
    assert len({s["pid"] for s in served}) == 2  # one process per device served its shards
    assert_equals_a_local_run(env, tiny_model_dir, tmp_path, run_dir)


def assert_equals_a_local_run(
    env: dict[str, str], tiny_model_dir: Path, tmp_path: Path, run_dir: Path
) -> None:
    """The same configuration in one process on local disk gives the same results."""
    local_config = tmp_path / "local.json"
    local_config.write_text(json.dumps(_config(tiny_model_dir, tmp_path / "local", "local")))
    ephemeral = {k: v for k, v in env.items() if k != "PREFECT_API_URL"}
    local = _sago(
        ephemeral | {"PREFECT_HOME": str(tmp_path / "ephemeral")},
        "run",
        "--config",
        str(local_config),
    )
    assert local.returncode == 0, local.stderr[-4000:]
    local_dir = next(p for p in (tmp_path / "local").iterdir() if (p / "manifest.json").exists())
    key = ["dataset", "prompt_id", "variant_id"]
    a = pl.read_parquet(run_dir / "generations.parquet").sort(key).drop("engine")
    b = pl.read_parquet(local_dir / "generations.parquet").sort(key).drop("engine")
    assert a.equals(b)
    sa = pl.read_parquet(run_dir / "summary.parquet").sort("dataset", "axis")
    sb = pl.read_parquet(local_dir / "summary.parquet").sort("dataset", "axis")
    np.testing.assert_allclose(sa["sgs"].to_numpy(), sb["sgs"].to_numpy(), rtol=1e-5, atol=1e-7)


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


def test_a_worker_killed_mid_run_is_crashed_and_resume_recomputes_only_its_shards(
    server: dict[str, str], tiny_model_dir: Path, tmp_path: Path
) -> None:
    env = server
    _setup_and_deploy(env)
    settings = _config(tiny_model_dir, tmp_path / "runs", "deployments")
    settings["n"] = 3  # 18 shards: 9 per device, enough to kill one worker mid-way
    settings["generation"]["max_new_tokens"] = 24
    config = tmp_path / "run.json"
    config.write_text(json.dumps(settings))
    workers = {d: _worker(env, d) for d in ("0", "1")}
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
        while time.time() < deadline:  # kill device-1's worker after its second shard
            served = [
                json.loads(p.read_text())
                for p in (tmp_path / "runs").glob("*/models/*/shards/*/worker.json")
            ]
            if sum(s["device"] == "1" for s in served) >= 2:
                break
            assert run.poll() is None, run.stderr.read() if run.stderr else ""
            time.sleep(0.2)
        _kill_tree(workers["1"].pid)  # the worker and the flow-run process it started
        workers["1"].wait()
        run_dir = next(
            p for p in (tmp_path / "runs").iterdir() if p.is_dir() and p.name != ".cache"
        )
        _, err = run.communicate(timeout=SILENCE_S + 300)
        finished = {p.parent.name for p in run_dir.glob("models/*/shards/*/generations.parquet")}
        assert run.returncode != 0 and "did not complete" in err, err[-3000:]
        assert "Crashed" in err  # the automation marked the silent run crashed
        assert not list(run_dir.rglob("*.tmp"))
        workers["1"] = _worker(env, "1")
        resumed = _sago(env, "resume", str(run_dir))
        assert resumed.returncode == 0, resumed.stderr[-4000:]
    finally:
        for worker in workers.values():
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGTERM)
                worker.wait(timeout=60)
    hits = generate_cache_hits(run_dir)
    assert len(hits) == 18
    recomputed = {label for label, hit in hits.items() if not hit}
    assert recomputed == set(hits) - finished  # only what the kill left unfinished ...
    assert 0 < len(recomputed) < 9
    devices = {
        p.parent.name: json.loads(p.read_text())["device"]
        for p in run_dir.glob("models/*/shards/*/worker.json")
    }
    assert {devices[label] for label in recomputed} == {"1"}  # ... all of the killed worker
    print(f"shards: 18, finished before resume {len(finished)}, recomputed {len(recomputed)}")
