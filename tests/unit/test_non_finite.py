"""A non-finite measurement is a missing value with its reason, never a NaN downstream."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from sago_core.artifacts.schemas import ANALYSIS, GENERATIONS, MIRRORING, PAIRS, conform
from sago_core.report.page.html import render_report
from sago_core.scoring.deltas import NON_FINITE, compute_deltas
from sago_core.scoring.prompt_scores import score_prompts
from sago_core.scoring.significance import one_sided_t_test
from sago_core.scoring.summary import summarize
from sago_core.statistics.intervals import bootstrap_pooled_ci
from sago_core.statistics.multiple_testing import benjamini_hochberg, holm
from sago_core.vocabulary import AXES, POOLED

PROMPTS = ("p1", "p2", "p3", "p4")
VARIANTS = ("register:+2:prefix", "register:-2:prefix")
REPLAY = "replay:base:0:global"
P_COLUMNS = ("p_eps_0_01", "p_eps_0_05", "p_eps_0_10", "p_floor", "p_holm", "p_bh")


def _family(variant: str) -> str:
    return "base" if variant == "base" else variant.split(":")[0]


def _tables() -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """A clean run's generations, analysis, pairs and mirroring: 4 prompts, 2 variants and
    a replay each; every measurement finite and prompt-dependent."""
    gen, ana, pairs, mirror = [], [], [], []
    for k, pid in enumerate(PROMPTS):
        for j, vid in enumerate(("base", *VARIANTS, REPLAY)):
            key = {"model": "m", "dataset": "d", "prompt_id": pid, "variant_id": vid}
            family = _family(vid)
            moved = family == "register"
            gen.append(
                {
                    **key,
                    "family": family,
                    "subtype": "politeness" if moved else "base",
                    "strength": [0.0, 2.0, -2.0, 0.0][j],
                    "position": "prefix" if moved else "global",
                    "prompt_text": f"q{pid}{vid}",
                    "response_text": "a",
                    "answer_text": "a",
                    "response_token_ids": [1],
                    "finish_reason": "stop",
                    "failure_reason": None,
                    "engine": "{}",
                }
            )
            shift = 0.1 * (k + 1) * j if moved else 0.0
            ana.append(
                {
                    **key,
                    "layer_cosines": [1.0 - shift / 10, 1.0 - shift / 10],
                    "layer_cosines_user": None,
                    "act_cos_mean": 1.0 - shift / 10,
                    "logprob": -5.0 - shift,
                    "mean_entropy": 1.0 + shift,
                    "n_response_tokens": 1,
                    "missing_reason": None,
                }
            )
            if vid != "base":
                pairs.append({**key, "bleu": 100.0 - 10 * shift, "bert_f1": 1.0 - shift / 5})
                mirror.append(
                    {**key, "m_variant": int(moved and j == 1 and k % 2 == 0), "m_base": 0}
                )
                mirror[-1] |= {"missing_reason": None, "detector": "rules"}
    return (
        conform(pl.DataFrame(gen), GENERATIONS),
        conform(pl.DataFrame(ana), ANALYSIS),
        conform(pl.DataFrame(pairs), PAIRS),
        conform(pl.DataFrame(mirror), MIRRORING),
    )


def _poison(frame: pl.DataFrame, variant: str, column: str, value: float) -> pl.DataFrame:
    hit = (pl.col("prompt_id") == "p1") & (pl.col("variant_id") == variant)
    return frame.with_columns(pl.when(hit).then(value).otherwise(pl.col(column)).alias(column))


def _summary_is_finite(summary: pl.DataFrame) -> None:
    for column in ("sgs", "t_stat", "ci_low", "ci_high", "mde", "floor", *P_COLUMNS):
        values = [v for v in summary[column].to_list() if v is not None]
        assert all(math.isfinite(v) or column == "t_stat" for v in values), column
        assert not any(isinstance(v, float) and math.isnan(v) for v in values), column


def test_one_minus_inf_entropy_removes_exactly_its_delta() -> None:
    generations, analysis, pairs, mirroring = _tables()
    poisoned = _poison(analysis, VARIANTS[0], "mean_entropy", float("-inf"))
    deltas = compute_deltas(generations, poisoned, pairs, mirroring)
    missing = deltas.filter(pl.col("delta").is_null())
    assert missing.select("prompt_id", "variant_id", "axis", "missing_reason").rows() == [
        ("p1", VARIANTS[0], "ent", NON_FINITE)
    ]
    assert deltas["delta_norm"].is_nan().sum() == 0 and deltas["delta"].is_infinite().sum() == 0

    scores = score_prompts(deltas)
    p1 = scores.filter((pl.col("prompt_id") == "p1") & (pl.col("axis") == "ent")).row(0, named=True)
    # p1's remaining variant, register -2 (j = 2): entropy 1 + 0.1 * 1 * 2 = 1.2 against the
    # base's 1.0, so delta 0.2, normalised by R_ent = 10: s = |0.02| over one variant
    assert p1["s"] == pytest.approx(0.02) and p1["n_variants"] == 1
    assert p1["missing_reason"] is None

    for test_against in ("eps", "floor"):
        summary = summarize(scores, test_against)
        _summary_is_finite(summary)
        ent = summary.filter((pl.col("axis") == "ent") & (pl.col("dataset") == POOLED))
        assert ent["n"][0] == 4 and ent["p_reference"][0] is not None


def test_an_old_deltas_file_with_a_non_finite_delta_cannot_poison_the_scores() -> None:
    """Before the guard, one -inf delta_norm made that prompt's s NaN (inf / inf in the
    scaled RMS), its two t-test rows NaN, and BH NaN for all 12 summary rows."""
    generations, analysis, pairs, mirroring = _tables()
    deltas = compute_deltas(generations, analysis, pairs, mirroring)
    raw = deltas.with_columns(
        pl.when((pl.col("prompt_id") == "p1") & (pl.col("axis") == "ent"))
        .then(float("-inf"))
        .otherwise(pl.col("delta_norm"))
        .alias("delta_norm")
    )
    scores = score_prompts(raw)  # an old deltas file: the non-finite delta is missing too
    assert scores["s"].is_nan().sum() == 0
    gap = scores.filter((pl.col("prompt_id") == "p1") & (pl.col("axis") == "ent"))
    assert gap["s"][0] is None and gap["missing_reason"][0] == NON_FINITE
    _summary_is_finite(summarize(scores))


@pytest.mark.parametrize(
    ("frame", "column", "axis"),
    [
        ("pairs", "bert_f1", "bert"),
        ("pairs", "bleu", "bleu"),
        ("analysis", "logprob", "prob"),
        ("analysis", "act_cos_mean", "act"),
    ],
)
def test_any_nan_measurement_is_missing_with_the_reason(frame: str, column: str, axis: str) -> None:
    generations, analysis, pairs, mirroring = _tables()
    if frame == "pairs":
        pairs = _poison(pairs, VARIANTS[1], column, float("nan"))
    else:
        analysis = _poison(analysis, VARIANTS[1], column, float("nan"))
    deltas = compute_deltas(generations, analysis, pairs, mirroring)
    missing = deltas.filter(pl.col("delta").is_null())
    assert missing.select("variant_id", "axis", "missing_reason").rows() == [
        (VARIANTS[1], axis, NON_FINITE)
    ]
    _summary_is_finite(summarize(score_prompts(deltas), "floor"))


def test_a_non_finite_base_measurement_removes_that_prompts_deltas_on_the_axis() -> None:
    generations, analysis, pairs, mirroring = _tables()
    analysis = _poison(analysis, "base", "logprob", float("-inf"))
    deltas = compute_deltas(generations, analysis, pairs, mirroring)
    missing = deltas.filter(pl.col("delta").is_null())
    assert set(missing["axis"]) == {"prob"} and set(missing["prompt_id"]) == {"p1"}
    assert missing.height == 3 and set(missing["missing_reason"]) == {NON_FINITE}
    scores = score_prompts(deltas)
    gap = scores.filter((pl.col("prompt_id") == "p1") & (pl.col("axis") == "prob")).row(
        0, named=True
    )
    assert gap["s"] is None and gap["missing_reason"] == NON_FINITE and gap["floor"] is None
    _summary_is_finite(summarize(scores, "floor"))


def test_the_report_counts_non_finite_measurements() -> None:
    generations, analysis, pairs, mirroring = _tables()
    poisoned = _poison(analysis, VARIANTS[0], "mean_entropy", float("-inf"))
    deltas = compute_deltas(generations, poisoned, pairs, mirroring)
    scores = score_prompts(deltas)
    prompts = pl.DataFrame(
        {"dataset": "d", "prompt_id": list(PROMPTS), "references": [["a"]] * len(PROMPTS)}
    )
    variants = pl.DataFrame({"family": ["register"], "kept": [True]})
    page = render_report(summarize(scores), scores, deltas, variants, prompts, generations, {})
    assert f"{NON_FINITE}: 1 " in page
    assert f'<td class="l">{NON_FINITE}</td><td>1</td>' in page


def test_corrections_leave_a_missing_p_out_of_the_family() -> None:
    pvalues = [0.01, None, 0.04, float("nan")]
    # family of two: Holm 0.01 * 2, 0.04 * 1; BH 0.01 * 2 / 1, 0.04 * 2 / 2
    assert holm(pvalues) == [pytest.approx(0.02), None, pytest.approx(0.04), None]
    assert benjamini_hochberg(pvalues) == [pytest.approx(0.02), None, pytest.approx(0.04), None]
    as_array = np.array([0.01, np.nan, 0.04])  # a null p read into numpy
    assert holm(list(as_array)) == [pytest.approx(0.02), None, pytest.approx(0.04)]


def test_summary_rows_without_a_p_value_stay_null_and_outside_the_family() -> None:
    rows = []
    for dataset, values in {"a": [0.1, 0.3, 0.2], "b": [0.4]}.items():  # b: one prompt, no test
        for i, s in enumerate(values):
            rows.append(
                {
                    "model": "m",
                    "dataset": dataset,
                    "prompt_id": f"{dataset}{i}",
                    "axis": "bleu",
                    "s": s,
                    "n_variants": 2,
                    "missing_reason": None,
                }
            )
    rows.append(rows[0] | {"prompt_id": "a9", "s": float("nan")})  # a NaN s is no score
    summary = summarize(pl.DataFrame(rows)).sort("dataset")
    by = {r["dataset"]: r for r in summary.iter_rows(named=True)}
    assert by["b"]["p_eps_0_05"] is None and by["b"]["p_holm"] is None and by["b"]["p_bh"] is None
    assert by["a"]["n"] == 3 and by[POOLED]["n"] == 4
    present = [by["a"]["p_eps_0_05"], by[POOLED]["p_eps_0_05"]]
    assert all(p is not None and math.isfinite(p) for p in present)
    # Holm over a family of two (b's missing p is not a member): 2 x the smaller p, then
    # the larger p itself (made monotone), capped at 1
    low, high = sorted(present)
    adjusted = sorted([by["a"]["p_holm"], by[POOLED]["p_holm"]])
    assert adjusted == pytest.approx([min(1.0, 2 * low), min(1.0, max(2 * low, high))])


def test_statistics_helpers_refuse_non_finite_input() -> None:
    assert one_sided_t_test(np.array([0.1, np.nan, 0.2]), 0.05).p_value is None
    assert one_sided_t_test(np.array([0.1, np.inf]), 0.05).p_value is None
    low, high = bootstrap_pooled_ci([np.array([0.1, 0.2, np.nan, 0.3, 0.15, 0.25])], seed=1)
    assert low is not None and high is not None and 0.1 <= low <= high <= 0.3


def test_every_axis_stays_measured_in_a_clean_run() -> None:
    deltas = compute_deltas(*_tables())
    assert deltas["delta"].null_count() == 0 and set(deltas["axis"]) == set(AXES)
