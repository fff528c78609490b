"""SIGKILL at seeded points, resume in a new run, nothing lost, nothing paid twice.

A chain is one run folder: a run killed at a planned point, a rerun of the same command
killed at the next planned point, and so on, then a rerun that finishes. Points (see
target.py): inside a generation batch, inside the scoring pass, after an artifact's temp file
is written and before its rename, after the rename and before anything records it, inside
the summary statistics. Checks per chain: every artifact readable and as the manifest says
(sha256, rows); final tables equal to an uninterrupted golden run; no backend call in any
run for a shard whose result was committed before that run started; no temp file left.

Every run is a new process, forked from one that already imported sago and Prefect
(``harness.target_processes``, shared with the other modules of the test process), and
SIGKILLed like any other. Chains are added two at a time
until the kills that really happened reach a target: by default at least 10 kills, each
point killed at least twice (with different seeds and hit numbers);
``SAGO_KILL_CAMPAIGN=full`` (a nightly run) asks for at least 60 kills, each point at least
12 times.
"""

from __future__ import annotations

import os
import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.reliability.harness import (
    Outcome,
    TargetProcesses,
    calls_by_process,
    final_tables,
    manifest_problems,
    run_dirs,
    shard_of_prompt,
    target_processes,
    unreadable_parquet,
    write_inputs,
)
from tests.reliability.target import POINTS

pytestmark = pytest.mark.slow
SEED = 20261129
FULL_CAMPAIGN = os.environ.get("SAGO_KILL_CAMPAIGN") == "full"
MIN_KILLS, MIN_PER_POINT = (60, 12) if FULL_CAMPAIGN else (10, 2)
# Hit numbers are drawn from 1..N: small enough that a resumed run still reaches the point.
MAX_HIT = {"generation": 12, "scoring": 12, "temp_written": 14, "renamed": 14, "statistics": 8}
KILLED = -9


def chain_plan(rng: random.Random) -> list[tuple[str, int]]:
    """Kills in pipeline order (temp_written/renamed happen everywhere), one or two a point."""
    plan = []
    for point in POINTS:
        for _ in range(rng.choice((1, 1, 2))):
            plan.append((point, rng.randint(1, MAX_HIT[point])))
    return plan


def run_chain(
    shared: Path, root: Path, runs: TargetProcesses, plan: list[tuple[str, int]]
) -> list[Outcome]:
    config, calls = write_inputs(shared, root), root / "calls.jsonl"
    outcomes = []
    for kill in plan:
        outcome = runs.run(config, calls, kill)
        outcomes.append(outcome)
        if outcome.returncode != KILLED:
            assert outcome.returncode == 0, outcome.output[-3000:]
            break  # the run got past the planned point and finished
    final = runs.run(config, calls)
    assert final.returncode == 0, final.output[-3000:]
    return [*outcomes, final]


def check_chain(root: Path, outcomes: list[Outcome], golden: dict) -> None:
    (run_dir,) = run_dirs(root / "runs")
    assert manifest_problems(run_dir) == []
    assert unreadable_parquet(run_dir) == []
    leftovers = [p for p in (root / "runs").rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == [], leftovers
    tables = final_tables(run_dir)
    for name, frame in golden.items():
        assert tables[name].equals(frame), f"{name} differs from the uninterrupted run"
    owner = shard_of_prompt(run_dir)
    calls = calls_by_process(root / "calls.jsonl")
    for outcome in outcomes:
        for call in calls.get(outcome.pid, []):
            shard = owner[call["prompt"]]
            artifact = "generations" if call["kind"] == "generate" else "analysis"
            done = any(
                p.endswith(f"/shards/{shard}/{artifact}.parquet") for p in outcome.committed_before
            )
            assert not done, f"run {outcome.pid} asked the backend again for committed {shard}"


def test_sigkill_at_seeded_points_loses_nothing_and_pays_nothing_twice(
    server_env: dict[str, str], tmp_path: Path
) -> None:
    campaign(target_processes(server_env), tmp_path)


def campaign(runs: TargetProcesses, tmp_path: Path) -> None:
    shared, golden_root = tmp_path / "inputs", tmp_path / "golden"
    config = write_inputs(shared, golden_root)
    golden_run = runs.run(config, golden_root / "calls.jsonl")
    assert golden_run.returncode == 0, golden_run.output[-3000:]
    (golden_dir,) = run_dirs(golden_root / "runs")
    golden = final_tables(golden_dir)
    # The last (clean) run of a finished chain asks the backend nothing at all.
    rerun = runs.run(config, golden_root / "calls.jsonl")
    assert rerun.returncode == 0 and rerun.pid not in calls_by_process(golden_root / "calls.jsonl")

    rng = random.Random(SEED)
    kills: dict[str, int] = dict.fromkeys(POINTS, 0)
    chains = 0
    # two chains at a time, until the kills that really happened reach the targets
    while sum(kills.values()) < MIN_KILLS or min(kills.values()) < MIN_PER_POINT:
        assert chains < 40, f"kills do not land where planned: {kills}"
        plans = {chains + i: chain_plan(rng) for i in range(2)}
        with ThreadPoolExecutor(max_workers=2) as pool:
            futures = {
                i: pool.submit(run_chain, shared, tmp_path / f"chain-{i:02d}", runs, plan)
                for i, plan in plans.items()
            }
            for i, future in futures.items():
                outcomes = future.result()
                check_chain(tmp_path / f"chain-{i:02d}", outcomes, golden)
                for (point, _), outcome in zip(plans[i], outcomes, strict=False):
                    kills[point] += outcome.returncode == KILLED
        chains += 2
    print(f"kills survived per point: {kills} (total {sum(kills.values())}, chains {chains})")
