"""A full or read-only disk at every kind of durable write: the run stops with a clear
message, leaves nothing partial, and the next run (space freed) reuses every finished stage.

The run evaluates a ``mock:`` model and an API model over the local OpenAI-compatible
server (one request at a time, so which request meets the fault is deterministic), so it
writes every kind of file: stage artifacts, Prefect result records, API cache entries,
ledger lines and the manifest. A chain of runs meets one fault each (see
``disk_target.py``: the fault is raised at the write's fsync), in the order semantic
score, cache, ledger, row cache, artifact, result, manifest, and a last run has room
again. The faults alternate between a full disk (ENOSPC) and a read-only one (EROFS), so
each errno meets three or four kinds of write (sago handles both the same way; a chain per
errno cost the suite a second pass of eight runs).

Checks per faulty run: it fails, its last line names the file and the space left there, no
temp file and no torn line is left, and no backend call is made for a shard committed
before it started. The last run's tables equal a run that never met a fault, every stage
committed before it is a cache hit, and the API was asked each request once, plus once
more for each answer whose cache entry or ledger line could not be written.

The run that never met a fault (with its API server and its count of requests) is a module
fixture. Every run is a new process, forked from one that already
imported sago and Prefect (``harness.target_processes``, shared with the other modules of the
test process; the API key is set in each run).
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.openai_server import ScriptedServer
from tests.reliability.harness import (
    TargetProcesses,
    calls_by_process,
    committed_results,
    final_tables,
    manifest_problems,
    run_dirs,
    shard_of_prompt,
    target_processes,
    unreadable_parquet,
    write_inputs,
)

pytestmark = pytest.mark.slow
API_MODEL = "litellm:openai/disk-1"
API_KEY = {"SAGO_DISK_KEY": "sk-disk-test"}
TEMP = re.compile(r"^\.(.+)\.w[0-9a-f]{8}-\d+\..*\.tmp$")
CHAIN = (  # (write, which of its kind meets the fault, errno)
    ("semantic", 1, "ENOSPC"),
    ("cache", 2, "EROFS"),
    ("ledger", 3, "ENOSPC"),
    ("rows", 1, "EROFS"),
    ("artifact", 4, "ENOSPC"),
    ("result", 3, "EROFS"),
    ("manifest", 1, "ENOSPC"),
)


def _inputs(shared: Path, root: Path, base_url: str) -> Path:
    config = write_inputs(shared, root)
    values = yaml.safe_load(config.read_text())
    values["models"] = ["mock:reliability", API_MODEL]
    values["api"] = {"base_url": base_url, "key_env": "SAGO_DISK_KEY", "concurrency": 1}
    config.write_text(yaml.safe_dump(values))
    return config


def _run(
    runs: TargetProcesses, config: Path, calls: Path, fault: tuple[str, str, int] | None
) -> tuple[int, subprocess.CompletedProcess[str]]:
    """(pid, outcome) of one run in a new process, with ``fault`` planned."""
    argv = [str(config), str(calls), *([fault[0], fault[1], str(fault[2])] if fault else [])]
    pid, key, out, err = runs.spawn("disk_target", argv, stderr_apart=True, env=API_KEY)
    code = runs.wait(key)
    return pid, subprocess.CompletedProcess(argv, code, out.read_text(), err.read_text())


@dataclass
class Clean:
    """The API server, the fork server, and what the run without faults left."""

    server: ScriptedServer
    runs: TargetProcesses
    inputs: Path
    golden: dict
    requests: int


@pytest.fixture(scope="module")
def clean(server_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Clean]:
    tmp_path = tmp_path_factory.mktemp("disk-clean")
    runs = target_processes(server_env)  # the API key is set in each run (``API_KEY``)
    with ScriptedServer() as server:
        config = _inputs(tmp_path / "inputs", tmp_path / "clean", server.base_url)
        done = _run(runs, config, tmp_path / "clean" / "calls.jsonl", None)[1]
        assert done.returncode == 0, done.stderr[-3000:]
        (clean_dir,) = run_dirs(tmp_path / "clean" / "runs")
        golden, requests = final_tables(clean_dir), server.total_calls()
        yield Clean(server, runs, tmp_path / "inputs", golden, requests)


def _target_of(written: str) -> str:
    """The file a temp file was going to become (an appended file is its own target)."""
    found = TEMP.match(Path(written).name)
    return str(Path(written).parent / found[1]) if found else written


def _torn_lines(path: Path) -> list[str]:
    bad = []
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            json.loads(line)
        except ValueError:
            bad.append(line)
    return bad


def test_a_full_or_read_only_disk_stops_cleanly_and_the_rerun_reuses_finished_stages(
    clean: Clean, tmp_path: Path
) -> None:
    server, runs, golden, requests = clean.server, clean.runs, clean.golden, clean.requests
    root = tmp_path / "faulty"
    config, calls = _inputs(clean.inputs, root, server.base_url), root / "calls.jsonl"
    survived, repeated, before_calls = 0, 0, server.total_calls()
    for kind, hit, code in CHAIN:
        committed = committed_results(root / "runs")
        pid, done = _run(runs, config, calls, (kind, code, hit))
        output = done.stdout + done.stderr  # Prefect logs the target's prints
        injected = [ln for ln in output.splitlines() if "INJECTED " in ln]
        assert len(injected) == 1, (kind, done.stdout[-3000:], done.stderr[-3000:])
        assert done.returncode != 0, done.stderr[-3000:]
        message = done.stderr.strip().splitlines()[-1]
        assert message.startswith("sago: error: cannot write "), message
        assert " MiB free there" in message and "no partial file" in message, message
        assert _target_of(injected[0].split()[-1]) in message, (injected, message)
        assert [p for p in (root / "runs").rglob("*.tmp")] == []
        (run_dir,) = run_dirs(root / "runs")
        assert _torn_lines(run_dir / "api_ledger.jsonl") == []
        assert unreadable_parquet(run_dir) == []
        owner = shard_of_prompt(run_dir) if (run_dir / "shards").is_dir() else {}
        for call in calls_by_process(calls).get(pid, []):
            artifact = "generations" if call["kind"] == "generate" else "analysis"
            shard = owner[call["prompt"]]
            assert not any(
                p.endswith(f"/shards/{shard}/{artifact}.parquet") and "mock_" in p
                for p in committed
            ), f"{kind}: the backend was asked again for committed {shard}"
        repeated += kind in ("cache", "ledger")
        survived += 1

    committed = committed_results(root / "runs")
    final = _run(runs, config, calls, None)[1]
    assert final.returncode == 0, final.stderr[-3000:]
    (run_dir,) = run_dirs(root / "runs")
    assert manifest_problems(run_dir) == []
    tables = final_tables(run_dir)
    for name, frame in golden.items():
        assert tables[name].equals(frame), f"{name} differs from the run without faults"
    stages = json.loads((run_dir / "manifest.json").read_text())["stages"]
    missed = [s["path"] for s in stages if s["path"] in committed and not s["cache_hit"]]
    assert missed == []
    assert server.total_calls() - before_calls == requests + repeated
    assert survived == len(CHAIN)
    print(f"ENOSPC and EROFS injections survived with nothing lost: {survived}")
