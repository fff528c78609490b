"""The benchmark's parts stay runnable: the GPU check's CPU smoke path, the workload, and a
smoke-sized ``make bench`` (both pipelines on two prompts, the same agreement checks, no
timing targets; a tiny random model in place of the embedded one), so a schema or API change
cannot break the bench silently."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from bench.__main__ import table
from bench.naive import fill_schema
from bench.pipelines import agree, compare, run_pipeline, tolerances
from bench.workload import Workload
from sago_core.artifacts.schemas import GENERATIONS


@pytest.mark.slow
def test_gpu_check_runs_on_cpu_at_tiny_size() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.gpu_check",
            "--size",
            "tiny",
            "--device",
            "cpu",
            "--new-tokens",
            "4",
            "--batch",
            "2",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    assert "batch-1 decode" in out.stdout and "analysis pass" in out.stdout


def test_workload_is_reproducible(tmp_path: Path) -> None:
    Workload(n=1, max_new_tokens=8).save(tmp_path / "a")
    Workload(n=1, max_new_tokens=8).save(tmp_path / "b")
    for name in ("prompts.parquet", "variants.parquet"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    variants = pl.read_parquet(tmp_path / "a" / "variants.parquet")
    assert variants.height == 6 * 10


@pytest.mark.slow
def test_naive_and_sago_agree_on_a_smoke_sized_workload(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    """Two prompts from two datasets (the naive pipeline reloads its model between them),
    one variant per family, a few tokens, a tiny random model: what ``make bench`` checks
    before timing."""
    model = f"hf:{tiny_model_dir}"  # the embedded model's GGUF load: test_embedded_model.py
    Workload(n=1, max_new_tokens=4, limit=2, per_family=1, model=model).save(tmp_path)
    naive = run_pipeline("bench.naive", tmp_path)
    fast = run_pipeline("bench.fast", tmp_path)
    share, worst = compare(tmp_path)
    assert set(worst) == set(tolerances()), worst
    assert agree(share, worst), (share, worst)
    assert share == 1.0
    generations = pl.read_parquet(tmp_path / "naive" / "generations.parquet")
    assert generations.height == 2 * 3 and generations.columns == list(GENERATIONS)
    assert set(generations["model"]) == {f"hf:{tiny_model_dir}"}  # the tiny model ran
    assert naive["tokens"] == fast["tokens"] > 0
    lines = table(naive, fast)
    # header, 4 stages and end to end, the insights and locate costs, one line per pipeline
    assert len(lines) == 10, lines
    assert lines[6].startswith("sago insights over") and lines[7].startswith("sago locate:")


def test_the_naive_frame_fills_columns_a_schema_gains() -> None:
    """A column added to a schema later is null in the naive artifact, not an error."""
    schema = {"a": pl.String, "added": pl.List(pl.Int32), "known": pl.Float64}
    frame = fill_schema(pl.DataFrame({"a": ["x"]}), schema, {"known": pl.lit(1)})
    assert frame.schema == pl.Schema(schema)
    assert frame.row(0) == ("x", None, 1.0)
