"""The pooled excess test, the replay calibration and the report section at K > 1, on
hand-built sampling_tests rows (expected numbers by hand or by the textbook formula)."""

from __future__ import annotations

import math

import polars as pl
import pytest
from scipy import stats

from sago_core.report.sections.sampling import sampling_sections
from sago_core.sampling.pooled import excess_table, replay_calibration


def _row(prompt: str, vid: str, family: str, axis: str, excess: float, p: float) -> dict:
    return {
        "model": "m",
        "dataset": "d",
        "prompt_id": prompt,
        "variant_id": vid,
        "family": family,
        "axis": axis,
        "excess": excess,
        "p_value": p,
    }


def _frame() -> pl.DataFrame:
    rows = []
    # bleu: per-prompt means of the two variants .10, .20, .30 (replay rows left out)
    for prompt, (a, b) in zip(
        ("p1", "p2", "p3"), ((0.05, 0.15), (0.2, 0.2), (0.1, 0.5)), strict=True
    ):
        rows += [
            _row(prompt, "v1", "noise", "bleu", a, 0.01),
            _row(prompt, "v2", "noise", "bleu", b, 0.5),
            _row(prompt, "v1", "noise", "prob", a, 0.2),
        ]
    # 20 replay rows, 2 of them with p < 0.05; excesses +-.01 around 0
    for i in range(20):
        p = 0.01 if i < 2 else 0.6
        rows.append(_row(f"r{i}", "replay", "replay", "bleu", 0.01 * (-1) ** i, p))
    return pl.DataFrame(rows)


def test_the_pooled_excess_is_tested_over_prompts() -> None:
    table = {r["axis"]: r for r in excess_table(_frame())}
    bleu = table["bleu"]
    assert bleu["n_prompts"] == 3 and bleu["n_rows"] == 6
    assert bleu["mean_excess"] == pytest.approx(0.2)
    # per-prompt means .1, .2, .3: sd .1, t = .2 / (.1 / sqrt 3), 2 degrees of freedom
    t = 0.2 / (0.1 / math.sqrt(3))
    assert bleu["p_zero"] == pytest.approx(stats.t.sf(t, 2))
    assert bleu["p_eps"] == pytest.approx(stats.t.sf((0.2 - 0.05) / (0.1 / math.sqrt(3)), 2))
    assert bleu["share_p_below"] == pytest.approx(0.5) and bleu["n_tested"] == 6
    prob = table["prob"]
    assert prob["p_zero"] is None and "either sign" in prob["missing_reason"]


def test_the_replay_calibration_by_hand() -> None:
    (row,) = replay_calibration(_frame())
    assert row["n_tested"] == 20 and row["share_p_below"] == pytest.approx(0.1)
    bound = 0.05 + 1.959964 * math.sqrt(0.05 * 0.95 / 20)  # 0.1455
    assert row["bound"] == pytest.approx(bound, abs=1e-6) and row["holds"] is True
    assert row["mean_excess"] == pytest.approx(0.0, abs=1e-15)
    # alternating +-.01: mean 0, so the one-sided p is exactly one half
    assert row["p_excess"] == pytest.approx(0.5)


def test_the_section_is_there_only_at_k_above_one() -> None:
    assert sampling_sections(None, None) == []
    (section,) = sampling_sections(_frame().with_columns(_pair_columns()), None)
    page = section.html()
    assert section.key == "sampling" and "Replay calibration" in page
    assert "<td>0.100</td><td>0.146</td>" in page  # the replay share and its bound
    assert "Variance components" not in page  # no table given


def _pair_columns() -> list[pl.Expr]:
    names = (
        "flip_right_to_wrong_excess",
        "flip_wrong_to_right_excess",
        "clusters_base",
        "clusters_variant",
        "entropy_base",
        "entropy_variant",
    )
    return [pl.lit(None, pl.Float64).alias(n) for n in names]
