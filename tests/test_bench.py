"""The benchmark's parts stay runnable: the GPU check's CPU smoke path, the workload."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from bench.workload import Workload

pytestmark = pytest.mark.slow


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
