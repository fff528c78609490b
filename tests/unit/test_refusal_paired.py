"""Refusal rows of a release comparison (sago_core/refusal/paired.py): per prompt failure
rates of two runs on shared prompts, paired tests, Holm, TOST and the verdict; expected by
hand (constant differences are decided exactly, statistics/paired.py's rule)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from sago_core.artifacts.layout import REFUSAL_FLIPS_FILE
from sago_core.refusal.paired import (
    TOO_FEW,
    refusal_paired,
    refusal_paired_runs,
    render_refusal_paired,
)


def _flips(
    model: str, excess: dict[str, list[float | None]], kind: str = "harmful"
) -> pl.DataFrame:
    rows = [
        {
            "model": model,
            "dataset": "d",
            "prompt_id": prompt,
            "kind": kind,
            "variant_id": f"{family}:{i}",
            "family": family,
            "failure_excess": value,
        }
        for prompt, values in excess.items()
        for i, (family, value) in enumerate(zip(["noise", "noise", "replay"], values, strict=True))
    ]
    return pl.DataFrame(rows)


PROMPTS = [f"p{i}" for i in range(6)]


def _row(table: pl.DataFrame, family: str) -> dict[str, object]:
    return table.filter(pl.col("family") == family).row(0, named=True)


def test_a_release_that_breaches_more_is_worse() -> None:
    a = _flips("m", {p: [0.0, 0.0, 1.0] for p in PROMPTS})  # replay's 1.0 is left out
    b = _flips("m2", {p: [1.0, 0.0, 0.0] for p in PROMPTS})  # every prompt at 0.5
    table = refusal_paired(a, b, [("m", "m2")])
    noise = _row(table, "noise")
    assert (noise["rate_a"], noise["rate_b"], noise["mean_diff"], noise["n"]) == (0.0, 0.5, 0.5, 6)
    assert (noise["p_paired_t"], noise["p_tost"]) == (0.0, 1.0)
    assert (noise["failure"], noise["verdict"]) == ("breach", "b_worse")
    assert _row(table, "__all__")["mean_diff"] == 0.5
    assert set(table["family"]) == {"noise", "__all__"}


def test_identical_releases_are_equivalent_and_too_few_prompts_have_no_verdict() -> None:
    a = _flips("m", {p: [0.0, 1.0, 0.0] for p in PROMPTS})
    table = refusal_paired(a, a, [("m", "m")])
    assert _row(table, "noise")["verdict"] == "equivalent"
    one = refusal_paired(_flips("m", {"p0": [1.0, None, 0.0]}), a, [("m", "m")])
    row = _row(one, "noise")
    assert (row["n"], row["verdict"], row["missing_reason"]) == (1, None, TOO_FEW)
    assert "| m | m | harmful | noise | breach | 1 |" in render_refusal_paired(one)


def test_runs_without_refusal_flips_have_no_refusal_rows(tmp_path: Path) -> None:
    run_a, run_b = tmp_path / "a", tmp_path / "b"
    run_a.mkdir()
    run_b.mkdir()
    flips = _flips("m", {p: [0.0, 0.0, 0.0] for p in PROMPTS})
    flips.write_parquet(run_a / REFUSAL_FLIPS_FILE)
    assert refusal_paired_runs(run_a, run_b, [("m", "m")]) is None
    flips.write_parquet(run_b / REFUSAL_FLIPS_FILE)
    table = refusal_paired_runs(run_a, run_b, [("m", "m")])
    assert table is not None and set(table["verdict"]) == {"equivalent"}
