"""A budgeted run's rounds and the row cache: a run that fails in round 2 resumes there and
asks no answered row again, its tables equal to an uninterrupted budgeted run's; a full run
after it asks only the cells the budgeted run did not; a budgeted run over the finished
full run asks the model nothing.

Each run is its own process (``harness.target_processes``) on the ``mock:`` backend, whose
every call is logged with the process id."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
import yaml

from sago_core.backends.mock import FAIL_ENV
from tests.reliability.harness import (
    calls_by_process,
    final_tables,
    run_dirs,
    target_processes,
    write_inputs,
)

pytestmark = pytest.mark.slow

GRID = {
    "register": None,
    "structural": None,
    "noise": {
        "spacing": [1, 5, 20, 50, 100],
        "punctuation": [],
        "capitalization": [10, 25, 50, 75, 100],
        "positions": ["global"],
    },
}


def config_of(shared: Path, root: Path, budget: dict | None) -> Path:
    path = write_inputs(shared, root)
    values = yaml.safe_load(path.read_text())
    values["variants"] = GRID
    if budget is not None:
        values["budget"] = budget
    path.write_text(yaml.safe_dump(values))
    return path


def asked(calls: Path, pid: int, kind: str = "generate") -> list[str]:
    return [c["prompt"] for c in calls_by_process(calls).get(pid, []) if c["kind"] == kind]


def test_a_budgeted_run_resumes_in_round_two_and_a_full_run_reuses_its_cells(
    server_env: dict[str, str], tmp_path: Path
) -> None:
    runs = target_processes(server_env)
    shared = tmp_path / "inputs"
    budget = {"fraction": 0.7, "rounds": 2}

    # an uninterrupted budgeted run: two rounds
    golden_config = config_of(shared, tmp_path / "golden", budget)
    golden = runs.run(golden_config, tmp_path / "golden" / "calls.jsonl")
    assert golden.returncode == 0, golden.output[-3000:]
    (golden_dir,) = run_dirs(tmp_path / "golden" / "runs")
    record = json.loads((golden_dir / "budget.json").read_text())
    assert record["rounds_run"] == 2, record
    # one verdict: the summary's p-values at eps 0.05 are the stopping rule's, every level
    summary = pl.read_parquet(golden_dir / "summary.parquet")
    rule = {
        (t["model"], t["dataset"], t["axis"]): t["p_above"]
        for t in record["tests"]
        if t["eps"] == 0.05
    }
    shown = {
        (r["model"], r["dataset"], r["axis"]): r["p_holm"] for r in summary.iter_rows(named=True)
    }
    assert rule and all(shown[key] == p for key, p in rule.items())
    cells = pl.read_parquet(golden_dir / "budget_cells.parquet")
    texts = pl.read_parquet(golden_dir / "variants.parquet").select(
        "dataset", "prompt_id", "variant_id", "text"
    )
    second = cells.filter(pl.col("round") == 2).join(
        texts, on=["dataset", "prompt_id", "variant_id"]
    )
    assert second.height > 0

    # the same run failing in round 2 (the backend falls over on a round-2 cell), resumed
    root = tmp_path / "chain"
    calls = root / "calls.jsonl"
    config = config_of(shared, root, budget)
    failed = runs.run(config, calls, env={FAIL_ENV: second["text"][0]})
    assert failed.returncode != 0, failed.output[-3000:]
    assert "round2" in failed.output, "the run did not reach round 2"
    resumed = runs.run(config, calls)
    assert resumed.returncode == 0, resumed.output[-3000:]
    first, again = asked(calls, failed.pid), asked(calls, resumed.pid)
    assert first and again
    assert set(first) & set(again) == set(), "a resumed round asked an answered row again"
    (run_dir,) = run_dirs(root / "runs")
    expected = final_tables(golden_dir)
    for name, frame in final_tables(run_dir).items():
        assert frame.equals(expected[name]), f"{name} differs from the uninterrupted run"

    # the full run in the same runs folder: only the cells the budgeted run did not ask
    full_config = config_of(shared, root, None)
    full = runs.run(full_config, calls)
    assert full.returncode == 0, full.output[-3000:]
    budgeted_texts = set(first) | set(again)
    full_asked = asked(calls, full.pid)
    assert set(full_asked) & budgeted_texts == set()
    full_dir = next(d for d in run_dirs(root / "runs") if d != run_dir)
    generations = pl.read_parquet(full_dir / "generations.parquet")
    assert len(full_asked) == generations.height - len(first) - len(again)

    # a budgeted run with another seed over the finished full run asks the model nothing
    reseeded = config_of(shared, root, {**budget, "seed": 7})
    over = runs.run(reseeded, calls)
    assert over.returncode == 0, over.output[-3000:]
    assert over.pid not in calls_by_process(calls), "a budgeted run over a full run asked"
