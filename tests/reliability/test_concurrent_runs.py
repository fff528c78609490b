"""Three or four processes on one artifact folder, same and different configs, started at
once: no torn file, every shard computed once, each config in its own content-addressed
run folder with the same results as a run alone (two configs share their common rows
through the row cache, so together they ask no more than both alone). Three processes
share one config; four
processes are two configs, two processes each (so two processes on one config is covered
there). Every run is a new process, forked from one that already imported sago and Prefect
(``harness.target_processes``)."""

from __future__ import annotations

import json
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from tests.reliability.harness import (
    calls_by_process,
    final_tables,
    manifest_problems,
    run_dirs,
    target_processes,
    unreadable_parquet,
    write_inputs,
)

pytestmark = pytest.mark.slow
TRIALS = (("same", 3), ("mixed", 4))


def _variant(config: Path, out: Path, seed: int) -> Path:
    values = yaml.safe_load(config.read_text())
    out.write_text(yaml.safe_dump({**values, "seed": seed}))
    return out


def test_concurrent_runs_share_one_folder_without_doing_work_twice(
    server_env: dict[str, str], tmp_path: Path
) -> None:
    shared, runs = tmp_path / "inputs", target_processes(server_env)
    alone: dict[int, dict] = {}
    alone_calls: dict[int, Counter] = {}
    for seed in (0, 1):  # each config run alone, in a folder of its own
        root = tmp_path / f"alone-{seed}"
        config = _variant(write_inputs(shared, root), root / f"seed{seed}.yaml", seed)
        assert runs.run(config, root / "calls.jsonl").returncode == 0
        (run_dir,) = run_dirs(root / "runs")
        alone[seed] = final_tables(run_dir)
        alone_calls[seed] = _asked(root / "calls.jsonl", None)

    report = []
    for trial, (kind, processes) in enumerate(TRIALS):
        root = tmp_path / f"trial-{trial}"
        base = write_inputs(shared, root)
        seeds = [0] * processes if kind == "same" else [i % 2 for i in range(processes)]
        configs = {s: _variant(base, root / f"seed{s}.yaml", s) for s in set(seeds)}
        calls = root / "calls.jsonl"
        with ThreadPoolExecutor(max_workers=processes) as pool:
            futures = [pool.submit(runs.run, configs[s], calls) for s in seeds]
            outcomes = [f.result() for f in futures]
        assert all(o.returncode == 0 for o in outcomes), [o.output[-2000:] for o in outcomes]

        folders = run_dirs(root / "runs")
        assert len(folders) == len(configs)  # one content-addressed folder per config
        for folder in folders:
            assert manifest_problems(folder) == []
            assert unreadable_parquet(folder) == []
            seed = json.loads((folder / "run_config.json").read_text())["seed"]
            tables = final_tables(folder)
            for name, frame in alone[seed].items():
                assert tables[name].equals(frame), (trial, seed, name)
        assert not [p for p in (root / "runs").rglob("*.tmp")]

        # all processes of one config together asked exactly what one run alone asks; two
        # configs share the rows they have in common (the row cache: a base asked by one
        # is an answer for the other), so together they ask at least every row either
        # asks alone and at most the two alone runs' calls, never a row twice per config
        for seed in set(seeds):
            pids = {o.pid for o, s in zip(outcomes, seeds, strict=True) if s == seed}
            if len(configs) == 1:
                assert _asked(calls, pids) == alone_calls[seed], (trial, seed)
            else:
                assert _asked(calls, pids) <= alone_calls[seed], (trial, seed)
        if len(configs) > 1:
            together = _asked(calls, None)
            union = alone_calls[0] | alone_calls[1]
            assert union <= together <= alone_calls[0] + alone_calls[1], trial
        busy = sum(1 for o in outcomes if o.pid in calls_by_process(calls))
        report.append(f"{kind} x{processes}: {busy} processes asked the backend")
    print("; ".join(report))


def _asked(calls: Path, pids: set[int] | None) -> Counter:
    return Counter(
        (c["kind"], c["prompt"])
        for pid, cs in calls_by_process(calls).items()
        if pids is None or pid in pids
        for c in cs
    )
