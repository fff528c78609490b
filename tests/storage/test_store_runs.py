"""Whole runs with ``runs_dir: s3://...`` against a real S3-compatible server on 127.0.0.1,
each "machine" a process with its own scratch folder (``SAGO_SCRATCH``), sharing nothing but
the bucket: a run, a rerun from a fresh machine (all cache hits) and, once an object of that
run is corrupted, a rerun from a third machine that detects it and recomputes its stage; a
run killed mid-shard and resumed from the store alone; two concurrent runs on one bucket.
Every run is forked from one process that already imported sago (``harness.TargetProcesses``,
the machine's own variables set in it) and reports to the test process's Prefect server."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
import yaml

from sago_core.artifacts.layout import FINISHED_RUN_FILES
from tests.reliability.harness import (
    TargetProcesses,
    calls_by_process,
    final_tables,
    manifest_problems,
    run_dirs,
    target_processes,
    write_inputs,
)
from tests.storage.s3_server import s3_client

pytestmark = pytest.mark.slow
KILLED = -9


@pytest.fixture(scope="module")
def runs(server_env: dict[str, str]) -> TargetProcesses:
    return target_processes(server_env)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The data file every run reads (one path, so every run has the same run id)."""
    return tmp_path_factory.mktemp("shared")


@pytest.fixture(scope="module")
def golden(runs: TargetProcesses, shared: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The same run on local disk: what every store run must equal, and its call count."""
    root = tmp_path_factory.mktemp("golden")
    config = write_inputs(shared, root)
    outcome = runs.run(config, root / "calls.jsonl")
    assert outcome.returncode == 0, outcome.output[-3000:]
    (run_dir,) = run_dirs(root / "runs")
    calls = sum(len(c) for c in calls_by_process(root / "calls.jsonl").values())
    return {
        "tables": final_tables(run_dir),
        "calls": calls,
        "run_id": run_dir.name,
    }


def _store_config(tmp: Path, bucket: str, shared: Path) -> Path:
    config = write_inputs(shared, tmp)
    values = yaml.safe_load(config.read_text())
    values["runs_dir"] = f"s3://{bucket}/team/runs"
    config.write_text(yaml.safe_dump(values))
    return config


def _machine(s3_env: dict[str, str], scratch: Path) -> dict[str, str]:
    """Another machine: the store's credentials and a scratch folder of its own."""
    return {**s3_env, "SAGO_SCRATCH": str(scratch)}


def _keys(endpoint: str, bucket: str) -> list[str]:
    pages = s3_client(endpoint).get_paginator("list_objects_v2").paginate(Bucket=bucket)
    return [o["Key"] for page in pages for o in page.get("Contents", [])]


def _run_folder(scratch: Path) -> Path:
    (stores,) = list(scratch.iterdir())
    (run_dir,) = run_dirs(stores)
    return run_dir


def _check_equal(run_dir: Path, golden: dict) -> None:
    assert manifest_problems(run_dir) == []
    tables = final_tables(run_dir)
    for name, frame in golden["tables"].items():
        assert tables[name].equals(frame), f"{name} differs from the run on local disk"


def test_a_run_lives_on_the_store_a_fresh_machine_reruns_it_and_a_corrupt_object_is_redone(
    runs: TargetProcesses,
    s3_env: dict[str, str],
    s3_endpoint: str,
    bucket: str,
    golden: dict,
    shared: Path,
    tmp_path: Path,
) -> None:
    config, calls = _store_config(tmp_path, bucket, shared), tmp_path / "calls.jsonl"
    first = runs.run(config, calls, env=_machine(s3_env, tmp_path / "machine-a"))
    assert first.returncode == 0, first.output[-3000:]
    run_a = _run_folder(tmp_path / "machine-a")
    _check_equal(run_a, golden)
    keys = _keys(s3_endpoint, bucket)
    prefix = f"team/runs/{golden['run_id']}/"
    for name in FINISHED_RUN_FILES:
        assert prefix + name in keys, f"{name} is not on the store"
    assert not [k for k in keys if k.endswith(".tmp") or "/.prefect/" in k or k.endswith(".lock")]
    assert any(k.startswith(prefix + ".prefect-results/") for k in keys)  # Prefect's records
    store = json.loads((run_a / "manifest.json").read_text())["store"]
    assert store["url"] == f"s3://{bucket}/team/runs" and store["requests"]["put"] > 0

    second = runs.run(config, calls, env=_machine(s3_env, tmp_path / "machine-b"))
    assert second.returncode == 0, second.output[-3000:]
    assert calls_by_process(calls).get(second.pid, []) == []  # nothing asked again
    run_b = _run_folder(tmp_path / "machine-b")
    _check_equal(run_b, golden)
    stages = json.loads((run_b / "manifest.json").read_text())["stages"]
    computed = [s["stage"] for s in stages if not s["cache_hit"]]
    assert computed == [], computed  # every stage came from the store

    # a corrupted object on the store is detected and its stage recomputed
    client = s3_client(s3_endpoint)
    (victim,) = [
        k
        for k in _keys(s3_endpoint, bucket)
        if k.endswith("/generations.parquet") and "/shards/" in k
    ][:1]
    head = client.head_object(Bucket=bucket, Key=victim)
    body = client.get_object(Bucket=bucket, Key=victim)["Body"].read()
    client.put_object(
        Bucket=bucket, Key=victim, Body=body[: len(body) // 2], Metadata=head["Metadata"]
    )  # truncated, its old sha256 kept
    third = runs.run(config, calls, env=_machine(s3_env, tmp_path / "machine-c"))
    assert third.returncode == 0, third.output[-3000:]
    run_c = _run_folder(tmp_path / "machine-c")
    _check_equal(run_c, golden)
    log = [json.loads(line) for line in (run_c / "integrity.jsonl").read_text().splitlines()]
    assert [e["reason"] for e in log] == ["store object corrupt"]
    assert victim.endswith(log[0]["path"])
    store = json.loads((run_c / "manifest.json").read_text())["store"]
    assert store["corrupt_objects"] == 1
    asked = calls_by_process(calls).get(third.pid, [])
    assert asked and len(asked) < golden["calls"]  # only the corrupted shard asked again
    restored = client.get_object(Bucket=bucket, Key=victim)["Body"].read()
    assert restored == body  # recomputed and pushed whole again
    assert (
        pl.read_parquet(run_c / "generations.parquet").height
        == golden["tables"]["generations"].height
    )


def test_a_run_killed_mid_shard_resumes_from_the_store_alone(
    runs: TargetProcesses,
    s3_env: dict[str, str],
    s3_endpoint: str,
    bucket: str,
    golden: dict,
    shared: Path,
    tmp_path: Path,
) -> None:
    config, calls = _store_config(tmp_path, bucket, shared), tmp_path / "calls.jsonl"
    killed = runs.run(config, calls, ("generation", 15), _machine(s3_env, tmp_path / "a"))
    assert killed.returncode == KILLED, killed.output[-3000:]
    done_before = {
        k.split("/shards/")[1].split("/")[0]
        for k in _keys(s3_endpoint, bucket)
        if k.endswith("/generations.parquet") and "/shards/" in k
    }
    assert done_before  # some shards had finished and were pushed
    url = f"s3://{bucket}/team/runs/{golden['run_id']}"
    env = _machine(s3_env, tmp_path / "b")  # another machine: empty scratch
    resumed = runs.outcome(runs.spawn("target", ["resume", url, str(calls)], env=env))
    assert resumed.returncode == 0, resumed.output[-3000:]
    run_b = _run_folder(tmp_path / "b")
    _check_equal(run_b, golden)
    stages = json.loads((run_b / "manifest.json").read_text())["stages"]
    recomputed = {
        s["path"].split("/shards/")[1].split("/")[0]
        for s in stages
        if s["stage"] == "generate" and not s["cache_hit"]
    }
    assert recomputed and not recomputed & done_before  # only what the kill left unfinished
    assert not [k for k in _keys(s3_endpoint, bucket) if k.endswith(".tmp")]


def test_two_concurrent_runs_on_one_bucket_compute_each_shard_once(
    runs: TargetProcesses,
    s3_env: dict[str, str],
    bucket: str,
    golden: dict,
    shared: Path,
    tmp_path: Path,
) -> None:
    config, calls = _store_config(tmp_path, bucket, shared), tmp_path / "calls.jsonl"
    argv = [str(config), str(calls)]
    started = [
        runs.spawn("target", argv, env=_machine(s3_env, tmp_path / name)) for name in ("a", "b")
    ]
    for spawned in started:
        outcome = runs.outcome(spawned)
        assert outcome.returncode == 0, outcome.output[-3000:]
    asked = sum(len(c) for c in calls_by_process(calls).values())
    assert asked == golden["calls"]  # every prompt asked once over both machines
    for name in ("a", "b"):
        _check_equal(_run_folder(tmp_path / name), golden)
