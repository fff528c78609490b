"""Patching recovery per layer: the relative guard, the ratio of sums and
the median with bands over prompts, against hand computations; a variant with a tiny gap
no longer moves the reported figure."""

from __future__ import annotations

import html

import numpy as np
import polars as pl
import pytest

from sago_core.statistics.intervals import MIN_PROMPTS, expanded_tail, interval_refusal, stable_seed
from sago_core.statistics.recovery import (
    MIN_RELATIVE_GAP,
    NO_CHANGE,
    recovery_by_layer,
    recovery_refusal,
    relative_gap,
)
from sago_core.statistics.tails import ALL_FAMILIES, prompt_weights

BASE_LOGP = -5.0


def _frame(gaps: list[float], restored: list[float], prompts: list[int], layer: int = 1):
    """patching.parquet rows of one model and family at one layer: logp_base fixed,
    logp_variant = base - gap, logp_patched = variant + restored."""
    variant = [BASE_LOGP - g for g in gaps]
    return pl.DataFrame(
        {
            "model": "m",
            "dataset": "d",
            "prompt_id": [f"p{p:02d}" for p in prompts],
            "variant_id": [f"v{i}" for i in range(len(gaps))],
            "family": "register",
            "layer": layer,
            "logprob_base": BASE_LOGP,
            "logprob_variant": variant,
            "logprob_patched": [v + r for v, r in zip(variant, restored, strict=True)],
        },
        schema_overrides={"layer": pl.Int32},
    )


def _clean(seed: int = 0) -> tuple[list[float], list[float], list[int]]:
    """23 variants over 12 prompts, gaps around 1 nat, recoveries around 0.31."""
    rng = np.random.default_rng(seed)
    gaps = rng.uniform(0.5, 1.5, 23).tolist()
    ratios = 0.31 + rng.normal(0, 0.1, 23)
    ratios += 0.31 - ratios.mean()  # the mean recovery is exactly 0.31
    restored = (ratios * np.array(gaps)).tolist()
    prompts = [i // 2 for i in range(23)]
    return gaps, restored, prompts


def _old_mean_of_ratios(frame: pl.DataFrame) -> float:
    """The old figure: the mean of per-variant recoveries, refused only at |gap| <= 1e-4."""
    gap = frame["logprob_base"] - frame["logprob_variant"]
    ratio = (frame["logprob_patched"] - frame["logprob_variant"]) / gap
    return float(ratio.filter(gap.abs() > 1e-4).mean())  # type: ignore[arg-type]


def test_the_guard_is_relative_to_the_base_answers_log_probability() -> None:
    assert MIN_RELATIVE_GAP == 0.01
    assert recovery_refusal(-5.0, -5.0 - 2e-4) == NO_CHANGE  # 4e-5 of 5 nats
    assert recovery_refusal(-5.0, -5.06) is None  # 0.06 / 5 = 1.2%
    assert recovery_refusal(-50.0, -50.4) == NO_CHANGE  # 0.8% of a long answer's 50 nats
    assert recovery_refusal(-0.001, -0.02) is None  # near-certain answer: scale 1 nat
    assert recovery_refusal(-0.001, -0.005) == NO_CHANGE
    assert relative_gap(-50.0, -49.0) == pytest.approx(0.02)
    assert relative_gap(float("-inf"), -1.0) is None


def test_one_tiny_gap_among_24_no_longer_moves_the_reported_figure() -> None:
    gaps, restored, prompts = _clean()
    clean = _frame(gaps, restored, prompts)
    # one more variant whose gap is 2e-4 nats and whose patch moves log p by 0.0202: a
    # recovery of 101
    tiny = _frame([*gaps, 2e-4], [*restored, 101 * 2e-4], [*prompts, 11])
    before_clean, before_tiny = _old_mean_of_ratios(clean), _old_mean_of_ratios(tiny)
    assert before_clean == pytest.approx(0.31)
    assert before_tiny == pytest.approx((23 * 0.31 + 101) / 24)  # 4.50: what the report drew
    after_clean = recovery_by_layer(clean, resamples=200)
    after_tiny = recovery_by_layer(tiny, resamples=200)
    row = after_tiny.filter(pl.col("family") == "register").row(0, named=True)
    expected = sum(restored) / sum(gaps)  # by hand: the restored change over the gaps
    assert row["ratio_of_sums"] == pytest.approx(expected, rel=1e-12)
    assert row["ratio_of_sums"] == pytest.approx(0.31, abs=0.05)
    assert row["median"] == pytest.approx(float(np.median(np.array(restored) / gaps)))
    assert row["n_variants"] == 23 and row["n_left_out"] == 1 and row["n_prompts"] == 12
    assert after_tiny.drop("n_left_out").equals(after_clean.drop("n_left_out"))


def test_the_ratio_of_sums_weighs_small_gaps_little_even_past_the_guard() -> None:
    gaps, restored, prompts = _clean(1)
    # a variant just past the guard (gap 0.06 nats at 5 nats) with a wild recovery of 20
    frame = _frame([*gaps, 0.06], [*restored, 20 * 0.06], [*prompts, 11])
    row = recovery_by_layer(frame, resamples=200).row(0, named=True)
    assert row["n_variants"] == 24
    assert row["ratio_of_sums"] == pytest.approx((sum(restored) + 1.2) / (sum(gaps) + 0.06))
    assert abs(row["ratio_of_sums"] - 0.31) < 0.1  # the mean of ratios would read 1.13


def test_negative_gaps_count_by_their_size_and_bands_are_over_prompts() -> None:
    rng = np.random.default_rng(4)
    gaps = rng.choice([-1.0, 1.0], 16) * rng.uniform(0.5, 1.5, 16)
    ratios = rng.uniform(0.0, 0.8, 16)
    prompts = [i // 2 for i in range(16)]
    frame = _frame(gaps.tolist(), (ratios * gaps).tolist(), prompts)
    row = recovery_by_layer(frame, resamples=300).filter(pl.col("family") == "register")
    got = row.row(0, named=True)
    assert got["ratio_of_sums"] == pytest.approx(
        float((ratios * np.abs(gaps)).sum() / np.abs(gaps).sum())
    )
    # the band by hand: a plain loop over the same prompt draws
    weights = prompt_weights([8], stable_seed("m", "register", "recovery"), 300)
    owner = np.array(prompts)
    sums, medians = [], []
    for w in weights:
        counts = w[owner]
        sums.append(float((counts * ratios * np.abs(gaps)).sum() / (counts * np.abs(gaps)).sum()))
        medians.append(float(np.median(np.repeat(ratios, counts))))
    tail = expanded_tail(8)
    low, high = np.percentile(sums, [tail, 100 - tail])
    assert got["ci_low"] == pytest.approx(low) and got["ci_high"] == pytest.approx(high)
    low, high = np.percentile(medians, [tail, 100 - tail])
    assert got["median_ci_low"] == pytest.approx(low) and got["median_ci_high"] == pytest.approx(
        high
    )
    assert got["ci_missing_reason"] is None


def test_too_few_prompts_give_no_band_and_say_why() -> None:
    few = MIN_PROMPTS - 1
    frame = _frame([1.0] * (3 * few), [0.5] * (3 * few), [i % few for i in range(3 * few)])
    out = recovery_by_layer(frame, resamples=50)
    for row in out.iter_rows(named=True):
        assert row["ratio_of_sums"] == pytest.approx(0.5) and row["median"] == pytest.approx(0.5)
        assert row["ci_low"] is None and row["median_ci_high"] is None
        assert row["ci_missing_reason"] == interval_refusal(few)
    assert set(out["family"]) == {"register", ALL_FAMILIES}


def test_the_report_draws_kl_when_no_variant_passes_the_guard() -> None:
    from sago_core.report.sections.locate import Located, locate_sections

    frame = _frame([1e-3] * 6, [5e-4] * 6, list(range(6))).with_columns(
        pl.lit(None, pl.Float64).alias("recovery"),
        pl.lit(0.2).alias("kl_first_token"),
        pl.lit(NO_CHANGE).alias("missing_reason"),
    )
    page = "".join(locate_sections(Located(None, frame)))
    assert 'id="fig-patching-recovery"' in page
    assert "no recovery to report (only the KL)" in page
    assert "<th>ratio of sums</th>" not in page


def test_bands_draw_prompts_over_all_datasets() -> None:
    """Six datasets of one prompt each: drawn within each dataset every resample was the
    sample itself and both bands were a point; drawn over all six prompts they are not.
    The KL curve's band likewise."""
    from sago_core.report.sections.locate import _kl_curve

    ratios = np.array([0.1, 0.2, 0.3, 0.5, 0.6, 0.9])
    frame = _frame([1.0] * 6, ratios.tolist(), list(range(6))).with_columns(
        (pl.lit("d") + pl.col("prompt_id")).alias("dataset"),
        pl.Series("kl_first_token", [0.1, 0.3, 0.2, 0.6, 0.4, 0.9]),
    )
    row = (
        recovery_by_layer(frame, resamples=500)
        .filter(pl.col("family") == "register")
        .row(0, named=True)
    )
    assert row["ratio_of_sums"] == pytest.approx(ratios.mean())
    sem = ratios.std(ddof=1) / np.sqrt(6)
    assert row["ci_high"] - row["ci_low"] > 2 * 1.96 * sem  # expanded: wider than z x sem
    assert row["median_ci_high"] > row["median_ci_low"]
    layers, stats = _kl_curve(frame, "m")
    assert layers == [1] and stats[0, 0] == pytest.approx(2.5 / 6)
    assert stats[0, 2] - stats[0, 1] > 0.1


def test_a_layer_without_a_defined_recovery_says_why() -> None:
    """Layer 1: one variant passes the guard; layer 2: none does (gap 1e-3 of 5 nats);
    layer 3: no finite log-probability. The figures of layers 2 and 3 are null, and
    missing_reason, not only the band's reason, says why; the report lists them."""
    from sago_core.report.sections.locate import Located, locate_sections
    from sago_core.statistics.recovery import NO_LOGPROB

    frame = pl.concat(
        [
            _frame([1.0] * 6, [0.5] * 6, list(range(6)), layer=1),
            _frame([1e-3] * 6, [5e-4] * 6, list(range(6)), layer=2),
            _frame([1.0] * 6, [0.5] * 6, list(range(6)), layer=3).with_columns(
                pl.lit(None, pl.Float64).alias("logprob_patched")
            ),
        ]
    ).with_columns(
        pl.lit(0.2).alias("kl_first_token"),
        pl.lit(None, pl.Float64).alias("recovery"),
        pl.when(pl.col("layer") == 3)
        .then(pl.lit("patched run failed"))
        .otherwise(None)
        .alias("missing_reason"),
    )
    out = recovery_by_layer(frame, resamples=50).filter(pl.col("family") == "register")
    by_layer = {row["layer"]: row for row in out.iter_rows(named=True)}
    assert by_layer[1]["ratio_of_sums"] == pytest.approx(0.5)
    assert by_layer[1]["missing_reason"] is None
    assert by_layer[2]["ratio_of_sums"] is None and by_layer[2]["median"] is None
    assert by_layer[2]["missing_reason"] == NO_CHANGE
    assert by_layer[3]["ratio_of_sums"] is None
    assert by_layer[3]["missing_reason"] == "patched run failed"
    unexplained = frame.filter(pl.col("layer") == 3).drop("missing_reason")
    alone = recovery_by_layer(unexplained, resamples=50).row(0, named=True)
    assert alone["missing_reason"] == NO_LOGPROB
    page = "".join(locate_sections(Located(None, frame)))
    assert f"m, register: layer(s) 2: NA ({html.escape(NO_CHANGE)})" in page
    assert "m, register: layer(s) 3: NA (patched run failed)" in page
