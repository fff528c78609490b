"""Running the two pipelines and checking they agree (shared by ``python -m bench`` and the
smoke test): identical responses, deltas within tolerance per axis."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl

from sago_core.registry.axes import axes

ROOT = Path(__file__).resolve().parents[1]
MIN_IDENTICAL = 0.9


def tolerances() -> dict[str, float]:
    """Per registered axis, its declared bench tolerance (registry/axes.py)."""
    return {axis.name: axis.tolerance for axis in axes()}


def run_pipeline(module: str, workdir: Path, *args: str) -> dict:
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", module, str(workdir), *args],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-20:])
        raise RuntimeError(f"{module} failed (exit {done.returncode}):\n{tail}")
    name = args[0] if args else ("naive" if module == "bench.naive" else "sago")
    return json.loads((workdir / name / "timings.json").read_text())


def compare(workdir: Path) -> tuple[float, dict[str, float]]:
    """Share of identical responses, and max |delta difference| per axis where they agree."""
    key = ["dataset", "prompt_id", "variant_id"]
    naive = pl.read_parquet(workdir / "naive/generations.parquet")
    fast = pl.read_parquet(workdir / "sago/generations.parquet")
    joined = naive.join(fast, on=key, suffix="_sago")
    same = joined.filter(pl.col("response_token_ids") == pl.col("response_token_ids_sago"))
    share = same.height / joined.height
    agreeing_prompts = set(
        joined.group_by("dataset", "prompt_id")
        .agg((pl.col("response_token_ids") == pl.col("response_token_ids_sago")).all().alias("ok"))
        .filter("ok")
        .select("dataset", "prompt_id")
        .iter_rows()
    )
    deltas = pl.read_parquet(workdir / "naive/deltas.parquet").join(
        pl.read_parquet(workdir / "sago/deltas.parquet"), on=[*key, "axis"], suffix="_sago"
    )
    deltas = deltas.filter(
        pl.struct("dataset", "prompt_id").map_elements(
            lambda s: (s["dataset"], s["prompt_id"]) in agreeing_prompts, return_dtype=pl.Boolean
        )
    )
    worst = {}
    for (axis,), frame in deltas.group_by("axis"):
        # A delta one pipeline has and the other lacks is a disagreement, not a gap of 0.
        one_sided = (frame["delta"].is_null() != frame["delta_sago"].is_null()).any()
        gap = (frame["delta"] - frame["delta_sago"]).abs().max()
        if one_sided:
            worst[str(axis)] = float("inf")
        elif isinstance(gap, int | float):
            worst[str(axis)] = float(gap)
        else:  # missing in both for every pair: nothing measured, nothing to agree on
            worst[str(axis)] = float("nan")
    return share, worst


def agree(share: float, worst: dict[str, float]) -> bool:
    """At least 90% identical responses, and every axis's deltas within its tolerance (an
    axis never compared, or missing on one side, disagrees)."""
    return share >= MIN_IDENTICAL and all(
        worst.get(a, float("inf")) <= t for a, t in tolerances().items()
    )
