"""Verified cache hits: a cached artifact that is present but wrong is recomputed, not reused.

After a clean run, seeded rounds corrupt artifacts of the run folder in three ways (cut in
half, one byte flipped, a hand edit that leaves a valid file: a Parquet cell changed and
rewritten, a line appended to a text file), then run the same command again. Checks per
round: every corrupted artifact is named in a logged warning and in the run's integrity
log, its stage is recomputed (the manifest says why), everything else is a cache hit, and
the final tables equal the clean run's. The report's provenance counts the recomputations.
Every run is a new process, forked from one that already imported sago and Prefect
(``harness.target_processes``).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import polars as pl
import pytest

from tests.reliability.harness import (
    final_tables,
    manifest_problems,
    run_dirs,
    target_processes,
    write_inputs,
)

pytestmark = pytest.mark.slow
SEED = 20261201
ROUNDS, PER_ROUND = 2, 3
KINDS = ("truncate", "flip", "edit")


def corrupt(path: Path, kind: str, rng: random.Random) -> None:
    data = path.read_bytes()
    if kind == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif kind == "flip":
        at = rng.randrange(len(data))
        path.write_bytes(data[:at] + bytes([data[at] ^ 0x5A]) + data[at + 1 :])
    elif path.suffix == ".parquet":  # a valid file with one value changed
        frame = pl.read_parquet(path)
        column = next(c for c, t in frame.schema.items() if t == pl.String)
        edited = frame.with_columns(
            pl.when(pl.int_range(pl.len()) == 0)
            .then(pl.lit("edited by hand"))
            .otherwise(pl.col(column))
            .alias(column)
        )
        edited.write_parquet(path)
    else:
        path.write_bytes(data + b"\nedited by hand\n")


def test_corrupted_cached_artifacts_are_detected_and_recomputed(
    server_env: dict[str, str], tmp_path: Path
) -> None:
    rng = random.Random(SEED)
    config = write_inputs(tmp_path / "inputs", tmp_path)
    calls, runs = tmp_path / "calls.jsonl", target_processes(server_env)
    first = runs.run(config, calls)
    assert first.returncode == 0, first.output[-3000:]
    (run_dir,) = run_dirs(tmp_path / "runs")
    golden = final_tables(run_dir)
    injected, detected = 0, 0
    for round_ in range(ROUNDS):
        stages = json.loads((run_dir / "manifest.json").read_text())["stages"]
        chosen = rng.sample([s["path"] for s in stages], PER_ROUND)
        for i, relative in enumerate(chosen):
            corrupt(run_dir / relative, KINDS[(round_ + i) % len(KINDS)], rng)
        injected += len(chosen)
        outcome = runs.run(config, calls)
        assert outcome.returncode == 0, outcome.output[-3000:]
        for relative in chosen:
            assert f"cached artifact {run_dir / relative} does not match" in outcome.output
        log = [json.loads(line) for line in (run_dir / "integrity.jsonl").read_text().splitlines()]
        assert len(log) == injected
        assert {e["path"] for e in log[-len(chosen) :]} == set(chosen)
        detected = len(log)
        rerun = json.loads((run_dir / "manifest.json").read_text())["stages"]
        recomputed = {s["path"] for s in rerun if s["recomputed"] == "checksum mismatch"}
        assert recomputed == set(chosen)
        # the rest is served from the cache (the report: its provenance count changed)
        fresh = {s["path"] for s in rerun if not s["cache_hit"]} - recomputed
        assert fresh <= {"report.html"}, fresh
        assert manifest_problems(run_dir) == []
        tables = final_tables(run_dir)
        for name, frame in golden.items():
            assert tables[name].equals(frame), f"{name} differs from the clean run"
        page = (run_dir / "report.html").read_text()
        assert f"Cache integrity: {injected} cached artifact(s) recomputed" in page
    assert detected == injected == ROUNDS * PER_ROUND
    print(f"corrupted artifacts detected / injected: {detected} / {injected}")
