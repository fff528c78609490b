"""Scores and statistics: RMS, normalisation, t-tests against scipy, pooled SGS."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from sago_core.scoring.prompt_scores import score_prompts
from sago_core.scoring.significance import one_sided_t_test
from sago_core.scoring.summary import summarize
from sago_core.vocabulary import AXES, POOLED, SCALES, normalise


def _deltas(values: list[float | None], axis: str = "bleu", prompt: str = "p1") -> pl.DataFrame:
    return pl.DataFrame(
        {
            "model": "m",
            "dataset": "d",
            "prompt_id": prompt,
            "variant_id": [f"v{i}" for i in range(len(values))],
            "family": "noise",
            "axis": axis,
            "delta": values,
            "delta_norm": [None if v is None else v / SCALES[axis] for v in values],
            "missing_reason": [None if v is not None else "gone" for v in values],
        },
        schema_overrides={"delta": pl.Float64, "delta_norm": pl.Float64},
    )


def test_scales_are_the_spec_constants() -> None:
    assert SCALES == {"act": 2, "bleu": 100, "bert": 1, "prob": 250, "ent": 10, "mr": 1}
    assert AXES == ("act", "bleu", "bert", "prob", "ent", "mr")
    assert normalise("prob", -125.0) == -0.5 and normalise("ent", 0.0) == 0.0


def test_rms_is_root_mean_square_of_normalised_deltas() -> None:
    scores = score_prompts(_deltas([-30.0, -40.0, 0.0]))
    expected = math.sqrt((0.3**2 + 0.4**2 + 0.0) / 3)
    assert scores["s"][0] == pytest.approx(expected)
    assert scores["n_variants"][0] == 3


@given(st.lists(st.floats(-100, 100, allow_nan=False), min_size=1, max_size=12))
@settings(max_examples=80, deadline=None)
def test_rms_is_zero_only_if_every_delta_is_zero(values: list[float]) -> None:
    frame = _deltas(values)
    s = score_prompts(frame)["s"][0]
    assert (s == 0.0) == all(v == 0.0 for v in frame["delta_norm"])
    assert s >= 0.0


def test_missing_deltas_are_skipped_and_an_all_missing_axis_is_null_with_reason() -> None:
    partial = score_prompts(_deltas([-50.0, None]))
    assert partial["s"][0] == pytest.approx(0.5) and partial["n_variants"][0] == 1
    missing = score_prompts(_deltas([None, None], axis="act"))
    assert missing["s"][0] is None and missing["missing_reason"][0] == "gone"


def test_one_sided_t_test_matches_scipy_and_the_formula() -> None:
    data = np.array([0.08, 0.12, 0.05, 0.2, 0.09, 0.15])
    for eps in (0.01, 0.05, 0.10):
        got = one_sided_t_test(data, eps)
        ref = stats.ttest_1samp(data, popmean=eps, alternative="greater")
        assert got.p_value == pytest.approx(ref.pvalue, rel=1e-12)
        t = (data.mean() - eps) / (data.std(ddof=1) / math.sqrt(len(data)))
        assert got.t_stat == pytest.approx(t)
        assert got.p_value == pytest.approx(stats.t.sf(t, df=len(data) - 1))


def test_t_test_degenerate_cases_are_decided_not_nan() -> None:
    assert one_sided_t_test(np.zeros(5), 0.05).p_value == 1.0
    assert one_sided_t_test(np.full(5, 0.3), 0.05).p_value == 0.0
    assert one_sided_t_test(np.array([0.2]), 0.05).p_value is None


def test_summary_pools_datasets_with_equal_weight() -> None:
    rows = []
    for dataset, values in {"a": [0.1, 0.3], "b": [0.5, 0.5, 0.5, 0.5]}.items():
        for i, s in enumerate(values):
            rows.append(
                {
                    "model": "m",
                    "dataset": dataset,
                    "prompt_id": f"{dataset}{i}",
                    "axis": "bleu",
                    "s": s,
                    "n_variants": 3,
                    "missing_reason": None,
                }
            )
    summary = summarize(pl.DataFrame(rows))
    by_dataset = {r["dataset"]: r for r in summary.iter_rows(named=True)}
    assert by_dataset["a"]["sgs"] == pytest.approx(0.2)
    assert by_dataset["b"]["sgs"] == pytest.approx(0.5)
    assert by_dataset[POOLED]["sgs"] == pytest.approx(0.35)  # not the prompt mean 0.4
    assert by_dataset[POOLED]["n"] == 6
    pooled_p = stats.ttest_1samp([0.1, 0.3, 0.5, 0.5, 0.5, 0.5], 0.05, alternative="greater")
    assert by_dataset[POOLED]["p_eps_0_05"] == pytest.approx(pooled_p.pvalue)


def test_summary_keeps_a_missing_axis_as_null_with_reason() -> None:
    frame = pl.DataFrame(
        {
            "model": ["m"],
            "dataset": ["d"],
            "prompt_id": ["p"],
            "axis": ["act"],
            "s": [None],
            "n_variants": [0],
            "missing_reason": ["no hidden states"],
        },
        schema_overrides={"s": pl.Float64},
    )
    summary = summarize(frame)
    assert summary["sgs"].to_list() == [None, None]
    assert all(r is not None for r in summary["missing_reason"].to_list())


def test_replay_is_the_noise_floor_never_part_of_the_score() -> None:
    variants = _deltas([-30.0, -40.0])
    replay = _deltas([-5.0]).with_columns(
        pl.lit("replay").alias("family"), pl.lit("replay:base:0:global").alias("variant_id")
    )
    scores = score_prompts(pl.concat([variants, replay]))
    assert scores["s"][0] == pytest.approx(math.sqrt((0.3**2 + 0.4**2) / 2))
    assert scores["n_variants"][0] == 2
    assert scores["floor"][0] == pytest.approx(0.05)


def _scores_with_floor(s: list[float], floor: list[float | None]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "model": "m",
            "dataset": "d",
            "prompt_id": [f"p{i}" for i in range(len(s))],
            "axis": "prob",
            "s": s,
            "n_variants": 3,
            "missing_reason": None,
            "floor": floor,
        },
        schema_overrides={"floor": pl.Float64, "missing_reason": pl.String},
    )


def test_significance_against_the_floor_is_a_paired_test() -> None:
    s = [0.30, 0.25, 0.40, 0.35, 0.28]
    floor = [0.28, 0.26, 0.36, 0.30, None]  # the last prompt has no replay
    summary = summarize(_scores_with_floor(s, floor), test_against="floor")
    row = summary.filter(pl.col("dataset") == POOLED).row(0, named=True)
    diffs = np.array(s[:4]) - np.array(floor[:4])
    expected = stats.ttest_1samp(diffs, 0.0, alternative="greater").pvalue
    assert row["floor"] == pytest.approx(np.mean(floor[:4]))
    assert row["p_floor"] == pytest.approx(expected)
    assert row["reference"] == "noise floor" and row["p_reference"] == row["p_floor"]
    # Against eps the same scores are far above 0.05: the floor is what makes them ordinary.
    by_eps = summarize(_scores_with_floor(s, floor)).filter(pl.col("dataset") == POOLED)
    assert by_eps["p_reference"][0] == by_eps["p_eps_0_05"][0] < 0.001 < row["p_floor"]


def test_no_replay_means_no_floor() -> None:
    summary = summarize(_scores_with_floor([0.1, 0.2], [None, None]), test_against="floor")
    assert summary["floor"].to_list() == [None, None]
    assert summary["p_reference"].to_list() == [None, None]
