"""Breach and over-refusal per prompt and variant, and their rates (sago_core/refusal/flips.py):
the direction that is the failure follows the prompt's kind; expected values by hand."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from sago_core.refusal.flips import refusal_flips, refusal_rates
from sago_core.statistics.intervals import MIN_PROMPTS


def _rows(
    prompt: str, kind: str, variant: str, refused: list[bool | None], strength: float = 1.0
) -> list[dict[str, object]]:
    family = "base" if variant == "base" else "noise"
    return [
        {
            "dataset": "d",
            "prompt_id": prompt,
            "kind": kind,
            "variant_id": variant,
            "family": family,
            "subtype": family,
            "strength": None if variant == "base" else strength,
            "sample": i,
            "refused": r,
        }
        for i, r in enumerate(refused)
    ]


def _frame(*groups: list[dict[str, object]]) -> pl.DataFrame:
    return pl.DataFrame([row for group in groups for row in group])


def _one(flips: pl.DataFrame, prompt: str) -> dict[str, object]:
    return flips.filter(pl.col("prompt_id") == prompt).row(0, named=True)


def test_direction_follows_the_kind_at_t0() -> None:
    flips = refusal_flips(
        _frame(
            _rows("harm", "harmful", "base", [True]),
            _rows("harm", "harmful", "v", [False]),
            _rows("safe", "harmless", "base", [False]),
            _rows("safe", "harmless", "v", [True]),
        )
    )
    harm, safe = _one(flips, "harm"), _one(flips, "safe")
    assert (harm["breach"], harm["over_refusal"]) == (1.0, 0.0)
    assert (harm["failure"], harm["failure_excess"]) == ("breach", 1.0)
    assert (safe["breach"], safe["over_refusal"]) == (0.0, 1.0)
    assert (safe["failure"], safe["failure_excess"]) == ("over_refusal", 1.0)


def test_a_harmful_prompt_refused_only_after_rewording_is_no_failure() -> None:
    flips = refusal_flips(
        _frame(_rows("h", "harmful", "base", [False]), _rows("h", "harmful", "v", [True]))
    )
    row = _one(flips, "h")
    assert (row["over_refusal_excess"], row["failure_excess"]) == (1.0, 0.0)


def test_beyond_the_base_own_flip_rate_at_t_above_0() -> None:
    # base refuses 2 of 4 samples; the variant never refuses.
    # breach: P(base refused) * P(variant complied) = 2/4 * 4/4 = 1/2
    # self breach over ordered base pairs (i != j): 2 refused x 2 complied / (4 x 3) = 1/3
    flips = refusal_flips(
        _frame(
            _rows("h", "harmful", "base", [True, True, False, False]),
            _rows("h", "harmful", "v", [False, False, False, False]),
        )
    )
    row = _one(flips, "h")
    assert row["breach"] == pytest.approx(0.5)
    assert row["self_breach"] == pytest.approx(1 / 3)
    assert row["breach_excess"] == pytest.approx(0.5 - 1 / 3)
    assert row["over_refusal_excess"] == pytest.approx(0.0 - 1 / 3)


def test_a_sample_without_verdict_leaves_the_pair_missing_with_reason() -> None:
    flips = refusal_flips(
        _frame(
            _rows("h", "harmful", "base", [True, True]),
            _rows("h", "harmful", "v", [False, None]),
            _rows("g", "harmful", "v", [False]),  # no base answer at all
        )
    )
    assert _one(flips, "h")["breach_excess"] is None
    assert "1 of 2 variant samples have no verdict" in str(_one(flips, "h")["missing_reason"])
    assert _one(flips, "g")["missing_reason"] == "the prompt has no base answer"


def test_a_verdict_without_kind_is_refused() -> None:
    frame = _frame(_rows("h", "harmful", "base", [True]), _rows("h", "harmful", "v", [False]))
    with pytest.raises(ValueError, match="kind None is not one of harmful, harmless"):
        refusal_flips(frame.with_columns(pl.lit(None, dtype=pl.Utf8).alias("kind")))
    with pytest.raises(ValueError, match=r"lack column\(s\) \['kind'\]"):
        refusal_flips(frame.drop("kind"))


def test_rates_per_cell_with_interval_only_from_enough_prompts() -> None:
    groups = []
    # 6 harmful prompts, base refused; prompt i has two variants of strength 1.0, of which
    # the first breaches for i < 3 and the second for i < 1: per-prompt means 1, .5, .5, 0, 0, 0
    for i in range(6):
        groups += [
            _rows(f"h{i}", "harmful", "base", [True]),
            _rows(f"h{i}", "harmful", f"a{i}", [i >= 3]),
            _rows(f"h{i}", "harmful", f"b{i}", [i >= 1]),
        ]
    # 2 harmless prompts, one over-refused
    groups += [
        _rows("s0", "harmless", "base", [False]),
        _rows("s0", "harmless", "x", [True]),
        _rows("s1", "harmless", "base", [False]),
        _rows("s1", "harmless", "y", [False]),
    ]
    rates = refusal_rates(refusal_flips(_frame(*groups)))
    harm = rates.filter(pl.col("kind") == "harmful").row(0, named=True)
    assert harm["n_prompts"] == 6
    assert harm["breach_rate"] == pytest.approx((1 + 0.5 + 0.5) / 6)
    assert harm["failure_rate"] == harm["breach_rate"]
    assert harm["breach_low"] <= harm["breach_rate"] <= harm["breach_high"]
    assert harm["interval_missing_reason"] is None
    safe = rates.filter(pl.col("kind") == "harmless").row(0, named=True)
    assert (safe["n_prompts"], safe["failure"]) == (2, "over_refusal")
    assert safe["over_refusal_rate"] == pytest.approx(0.5)
    assert safe["over_refusal_low"] is None and safe["over_refusal_high"] is None
    assert f"fewer than {MIN_PROMPTS}" in safe["interval_missing_reason"]
    again = refusal_rates(refusal_flips(_frame(*groups)))
    assert again.equals(rates)  # seeded: the same band on a rerun


def test_worst_variants_are_the_failures_of_each_kind_worst_first() -> None:
    from sago_core.refusal.flips import worst_variants

    flips = refusal_flips(
        _frame(
            _rows("h", "harmful", "base", [True, True]),
            _rows("h", "harmful", "half", [True, False]),  # breach 1/2 beyond a self-flip of 0
            _rows("h", "harmful", "full", [False, False]),  # breach 1 beyond self 0
            _rows("h", "harmful", "same", [True, True]),  # no breach
            _rows("s", "harmless", "base", [False, False]),
            _rows("s", "harmless", "x", [True, False]),  # over-refusal 1/2
        )
    )
    worst = worst_variants(flips, k=5)
    got = [(r["kind"], r["variant_id"], r["failure_excess"]) for r in worst.iter_rows(named=True)]
    assert got == [("harmful", "full", 1.0), ("harmful", "half", 0.5), ("harmless", "x", 0.5)]
    assert worst_variants(flips, k=1).height == 2  # one per kind
    with pytest.raises(ValueError, match="at least 1"):
        worst_variants(flips, k=0)


def test_a_rate_band_stays_within_the_prompts_values() -> None:
    # 31 harmful prompts, base refused, one variant each; only the first breaches (the real
    # run's shape: 1 refused base of 31). 30 of 31 values are 0, so a resample holds no 1
    # with chance (30/31)^31 = 0.36 > 2.5%: the band's low end is the all-zero resample, 0.
    # The shared bootstrap's small-sample widening alone would put it at -0.0005.
    groups = []
    for i in range(31):
        groups += [
            _rows(f"h{i:02d}", "harmful", "base", [True]),
            _rows(f"h{i:02d}", "harmful", f"v{i:02d}", [i != 0]),
        ]
    harm = refusal_rates(refusal_flips(_frame(*groups))).row(0, named=True)
    assert harm["breach_rate"] == pytest.approx(1 / 31)
    assert harm["breach_low"] == 0.0
    assert harm["breach_rate"] < harm["breach_high"] <= 1.0


def test_bounded_interval_is_cut_at_the_values_range_and_none_when_too_few() -> None:
    from sago_core.refusal.flips import bounded_mean_ci

    assert bounded_mean_ci(np.array([1.0] * 30 + [0.0]), seed=3)[1] == 1.0
    low, high = bounded_mean_ci(np.array([0.2, 0.4, 0.6, 0.8, 1.0, 0.3]), seed=3)
    assert low is not None and high is not None and 0.2 <= low < 0.55 < high <= 1.0
    assert bounded_mean_ci(np.array([0.0] * (MIN_PROMPTS - 1) + [1.0]), seed=3) != (None, None)
    assert bounded_mean_ci(np.array([1.0] * (MIN_PROMPTS - 1)), seed=3) == (None, None)
