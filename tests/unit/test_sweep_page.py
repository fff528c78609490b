"""The sweep's table and page on small hand-made arm frames: every expected
number is worked out by hand in the comments."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl

from sago_core.report.sweep.page import (
    GREEDY_SHARE,
    ONE_SAMPLE_SHARE,
    VARIANCE_COMPONENTS_FILE,
    ArmRun,
    arm_rows,
    line_chart,
    render_sweep,
    sweep_table,
)

GREEDY = ArmRun(0.0, 1, "demo-aaaa", Path("runs/demo-aaaa"))
HOT = ArmRun(0.7, 8, "demo-bbbb", Path("runs/demo-bbbb"))


def _summary(sgs: float) -> pl.DataFrame:
    row = {"model": "m", "axis": "bleu", "n": 2, "missing_reason": None}
    band = {"ci_low": sgs - 0.05, "ci_high": sgs + 0.05}
    return pl.DataFrame(
        [
            {**row, "dataset": "__pooled__", "sgs": sgs, **band},
            {**row, "dataset": "d1", "sgs": 9.0, "ci_low": None, "ci_high": None},
        ]
    )


def _deltas() -> pl.DataFrame:
    """register: p1 deltas 0.3, -0.4 (RMS sqrt(0.125)), p2 0.1, 0.1 (RMS 0.1); noise: p1 0.6,
    p2 0.0; the replay (0.05 each) is the floor, never part of a score."""
    rows = []
    for prompt, family, values in [
        ("p1", "register", [0.3, -0.4]),
        ("p2", "register", [0.1, 0.1]),
        ("p1", "noise", [0.6]),
        ("p2", "noise", [0.0]),
        ("p1", "replay", [0.05]),
        ("p2", "replay", [0.05]),
    ]:
        for i, value in enumerate(values):
            rows.append(
                {
                    "model": "m",
                    "dataset": "d1",
                    "prompt_id": prompt,
                    "variant_id": f"{family}:{i}",
                    "family": family,
                    "subtype": "x",
                    "strength": None,
                    "position": None,
                    "axis": "bleu",
                    "delta": value,
                    "delta_norm": value,
                    "missing_reason": None,
                }
            )
    return pl.DataFrame(rows, schema_overrides={"strength": pl.Float64, "position": pl.String})


def _variance(share: float | None = 0.4, reason: str | None = None) -> pl.DataFrame:
    """VARIANCE_COMPONENTS' keys and share columns: a dataset row (never read) and the
    pooled row."""
    band = (None, None) if share is None else (share - 0.2, share + 0.2)
    return pl.DataFrame(
        {
            "model": ["m", "m"],
            "dataset": ["d1", "__pooled__"],
            "axis": ["bleu", "bleu"],
            "share": [0.9, share],
            "share_ci_low": [0.8, band[0]],
            "share_ci_high": [1.0, band[1]],
            "missing_reason": [None, reason],
            "ci_missing_reason": [None, None if share is not None else "no share: no interval"],
        },
        schema_overrides={"share": pl.Float64, "share_ci_low": pl.Float64},
    )


def test_an_arm_has_its_pooled_row_and_one_row_per_family_with_sgs_by_hand() -> None:
    rows = arm_rows(GREEDY, _summary(0.25), _deltas())
    by_family = {r["family"]: r for r in rows.iter_rows(named=True)}
    assert set(by_family) == {"__all__", "register", "noise"}
    assert by_family["__all__"]["sgs"] == 0.25 and by_family["__all__"]["ci_low"] == 0.2
    assert math.isclose(by_family["register"]["sgs"], (math.sqrt(0.125) + 0.1) / 2)
    assert math.isclose(by_family["noise"]["sgs"], 0.3)
    assert by_family["noise"]["n"] == 2
    assert by_family["noise"]["ci_low"] is None and by_family["noise"]["ci_missing_reason"]
    assert set(rows["measure"]) == {"sgs"} and set(rows["samples"]) == {1}
    assert set(rows["prompt_share_missing_reason"]) == {GREEDY_SHARE}
    assert rows["prompt_share"].null_count() == rows.height


def test_a_sampled_arm_reads_the_pooled_share_or_says_why_not() -> None:
    rows = arm_rows(HOT, _summary(0.1), _deltas(), _variance())
    by_family = {r["family"]: r for r in rows.iter_rows(named=True)}
    assert set(rows["measure"]) == {"sgs_excess"}
    every = by_family["__all__"]
    assert every["prompt_share"] == 0.4
    assert math.isclose(every["prompt_share_ci_low"], 0.2)
    assert every["prompt_share_missing_reason"] is None
    assert every["prompt_share_ci_missing_reason"] is None
    assert by_family["register"]["prompt_share"] is None
    assert "not split by family" in by_family["register"]["prompt_share_missing_reason"]

    flat = arm_rows(HOT, _summary(0.1), None, _variance(None, "no variation within prompts"))
    assert flat["prompt_share"][0] is None
    assert flat["prompt_share_missing_reason"][0] == "no variation within prompts"
    assert flat["prompt_share_ci_missing_reason"][0] == "no share: no interval"
    without = arm_rows(HOT, _summary(0.1))
    assert without.height == 1
    assert VARIANCE_COMPONENTS_FILE in without["prompt_share_missing_reason"][0]
    odd = arm_rows(HOT, _summary(0.1), None, pl.DataFrame({"model": ["m"], "ratio": [0.5]}))
    assert "lacks a column" in odd["prompt_share_missing_reason"][0]
    one = arm_rows(ArmRun(0.7, 1, "demo-cccc", Path("x")), _summary(0.1), None, _variance())
    assert one["measure"][0] == "sgs" and one["prompt_share_missing_reason"][0] == ONE_SAMPLE_SHARE


def test_the_table_orders_arms_and_the_page_draws_and_names_every_na() -> None:
    frame = sweep_table(
        [arm_rows(HOT, _summary(0.1), _deltas(), _variance()), arm_rows(GREEDY, _summary(0.25))]
    )
    every = frame.filter(pl.col("family") == "__all__")
    assert every["temperature"].to_list() == [0.0, 0.7]
    assert every["sgs"].to_list() == [0.25, 0.1]
    assert frame["family"].to_list()[:2] == ["__all__", "__all__"]
    page = render_sweep(frame, "demo-sweep-x")
    assert page.count("<svg") == 2 and "<polyline" in page and "T 0.7" in page
    assert page.count('stroke-width="1"') == 3  # the whiskers: two SGS bands, one share band
    assert "sgs_excess" in page and "[0.2000, 0.6000]" in page
    assert f"NA ({GREEDY_SHARE})" in page
    assert "demo-aaaa" in page and "demo-bbbb" in page


def test_a_missing_value_breaks_its_line_and_draws_no_point() -> None:
    svg = line_chart(
        "x", {"bleu": [(0.0, 0.1, None, None), (0.3, None, None, None), (0.7, 0.2, 0.1, 0.3)]}
    )
    assert svg.count("<circle") == 2 and "<polyline" not in svg
    joined = line_chart("x", {"bleu": [(0.0, 0.1, None, None), (0.7, 0.2, None, None)]})
    assert joined.count("<polyline") == 1
    assert "every one is NA" in line_chart("x", {"bleu": [(0.0, None, None, None)]})
