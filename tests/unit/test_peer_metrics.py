"""Peer indices: each checked against a hand computation on a small table (the
arithmetic in the comments), CPS also against the published numbers of "State of What Art?",
and every value that cannot be computed is NA with its reason, never 0 or NaN."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pytest

from sago_core.artifacts.schemas import PEER_METRICS
from sago_core.peer_metrics.full_matrix import NO_MATRIX
from sago_core.peer_metrics.multi_prompt import avg_p, cps, max_p
from sago_core.peer_metrics.pdr import pdr
from sago_core.peer_metrics.posix import posix_psi
from sago_core.peer_metrics.pss import pss
from sago_core.peer_metrics.table import (
    BASE_NEVER_RIGHT,
    NO_ANALYSIS,
    few_shared,
    peer_metrics,
)


def peer_metrics_on_few(
    instances: pl.DataFrame, deltas: pl.DataFrame, analysis: pl.DataFrame | None
) -> pl.DataFrame:
    """The table of the hand computations below: their two instances may compare templates
    (the default asks for five shared instances; its own test is at the end)."""
    return peer_metrics(instances, deltas, analysis, min_shared=1)


# --- the formulas on plain numbers ---------------------------------------------------------


def test_pss_is_the_mean_absolute_gap_over_unordered_pairs() -> None:
    # Y = 1, 0, 1: pairs (1,0) 1, (1,1) 0, (0,1) 1 -> 2 / 3
    assert pss([1.0, 0.0, 1.0]) == pytest.approx(2 / 3)
    # Y = 1.0, 0.8, 0.5: gaps 0.2, 0.5, 0.3 -> 1.0 / 3
    assert pss([1.0, 0.8, 0.5]) == pytest.approx(1 / 3)
    assert pss([1.0, 1.0, 1.0]) == 0.0
    assert pss([0.7]) is None  # one prompt: no pair


def test_posix_psi_is_the_length_normalised_log_ratio_over_the_scored_pairs() -> None:
    # log P(y|x) = -12, L = 4; under the variants -10 and -15:
    # |-10 + 12| / 4 = 0.5, |-15 + 12| / 4 = 0.75 -> mean 0.625
    assert posix_psi([-10.0, -15.0], -12.0, 4) == pytest.approx(0.625)
    assert posix_psi([-12.0], -12.0, 4) == 0.0  # the same log-probability: no sensitivity
    assert posix_psi([], -12.0, 4) is None
    assert posix_psi([-10.0], -12.0, 0) is None  # an empty answer: 1 / L undefined


def test_pdr_is_one_minus_the_ratio_of_correct_answers() -> None:
    # base right 3 times, variant right 2 times on the same four instances: 1 - 2/3 = 1/3
    assert pdr([True, True, True, False], [True, False, False, True]) == pytest.approx(1 / 3)
    # the variant right more often than the base: a negative drop, 1 - 2/1 = -1
    assert pdr([True, False], [True, True]) == pytest.approx(-1.0)
    assert pdr([False, False], [True, False]) is None  # divides by the base's 0
    with pytest.raises(ValueError, match="one variant verdict per base verdict"):
        pdr([True], [True, False])


def test_multi_prompt_statistics_by_hand() -> None:
    # accuracies 0.5, 0.75, 0.25: MaxP 0.75, AvgP 0.5, CPS = (1 - (0.75 - 0.5)) * 0.75 = 0.5625
    accuracies = [0.5, 0.75, 0.25]
    assert max_p(accuracies) == 0.75
    assert avg_p(accuracies) == 0.5
    assert cps(0.75, 0.5) == pytest.approx(0.5625)


@pytest.mark.parametrize(
    ("model", "maxp", "avgp", "published_cps"),
    [
        # SLAB-NLP/Multi-Prompt-LLM-Evaluation, data/metric results/open-source models/
        # "... MaxP / AvgP / CPS (no filtering).csv", LMentry "all words from category"
        ("t0_3b", 0.8, 0.6172093023255814, 0.6537674418604651),
        ("t0pp", 0.99, 0.8454263565891468, 0.8468720930232553),
        ("flan-t5-xxl", 0.99, 0.8673643410852715, 0.8685906976744188),
    ],
)
def test_cps_reproduces_the_published_state_of_what_art_numbers(
    model: str, maxp: float, avgp: float, published_cps: float
) -> None:
    assert cps(maxp, avgp) == pytest.approx(published_cps, abs=1e-12), model


# --- the table over a run's frames ---------------------------------------------------------

MODEL, DATASET = "mock:m", "d"
VARIANTS = [("n1", "noise"), ("n2", "noise"), ("r1", "register")]
# (prompt, variant) -> (base right, variant right)
VERDICTS = {
    ("p1", "n1"): (True, False),
    ("p1", "n2"): (True, True),
    ("p1", "r1"): (True, False),
    ("p2", "n1"): (False, False),
    ("p2", "n2"): (False, True),
    ("p2", "r1"): (False, False),
}
# BERTScore F1 of the variant's answer against the base answer, minus 1 (the bert delta)
BERT = {
    ("p1", "n1"): -0.2,
    ("p1", "n2"): -0.1,
    ("p1", "r1"): -0.5,
    ("p2", "n1"): None,
    ("p2", "n2"): 0.0,
    ("p2", "r1"): -0.3,
}
# log P(base answer | prompt); the base answer has 4 tokens on p1, 2 on p2
LOGPROBS = {
    ("p1", "base"): -12.0,
    ("p1", "n1"): -10.0,
    ("p1", "n2"): -15.0,
    ("p1", "r1"): -12.0,
    ("p2", "base"): -8.0,
    ("p2", "n1"): -9.0,
    ("p2", "n2"): None,
    ("p2", "r1"): -5.0,
}
TOKENS = {"p1": 4, "p2": 2}
REPLAY = "replay:base:0:global"


def _family(variant: str) -> str:
    return dict(VARIANTS)[variant]


def _instances(verdicts: dict | None = None, reason: str | None = None) -> pl.DataFrame:
    verdicts = VERDICTS if verdicts is None else verdicts
    return pl.DataFrame(
        [
            {
                "model": MODEL,
                "dataset": DATASET,
                "prompt_id": prompt,
                "variant_id": variant,
                "family": _family(variant),
                "base_correct": base,
                "variant_correct": right,
                "correct_missing_reason": reason,
            }
            for (prompt, variant), (base, right) in verdicts.items()
        ],
        schema_overrides={
            "base_correct": pl.Boolean,
            "variant_correct": pl.Boolean,
            "correct_missing_reason": pl.String,
        },
    )


def _deltas() -> pl.DataFrame:
    rows = [
        {
            "model": MODEL,
            "dataset": DATASET,
            "prompt_id": prompt,
            "variant_id": variant,
            "family": _family(variant),
            "axis": "bert",
            "delta": delta,
            "missing_reason": None if delta is not None else "no BERTScore for this pair",
        }
        for (prompt, variant), delta in BERT.items()
    ]
    # the replay is the noise floor, not a prompt variant: it must change nothing
    rows += [
        {
            "model": MODEL,
            "dataset": DATASET,
            "prompt_id": prompt,
            "variant_id": REPLAY,
            "family": "replay",
            "axis": "bert",
            "delta": -0.9,
            "missing_reason": None,
        }
        for prompt in ("p1", "p2")
    ]
    return pl.DataFrame(rows, schema_overrides={"delta": pl.Float64})


def _analysis(logprobs: dict | None = None, reason: str | None = None) -> pl.DataFrame:
    logprobs = LOGPROBS if logprobs is None else logprobs
    rows = [
        {
            "model": MODEL,
            "dataset": DATASET,
            "prompt_id": prompt,
            "variant_id": variant,
            "logprob": value,
            "n_response_tokens": TOKENS[prompt],
            "missing_reason": reason,
        }
        for (prompt, variant), value in logprobs.items()
    ]
    rows += [  # a replay far from its base: must change nothing
        {
            "model": MODEL,
            "dataset": DATASET,
            "prompt_id": prompt,
            "variant_id": REPLAY,
            "logprob": -100.0,
            "n_response_tokens": TOKENS[prompt],
            "missing_reason": None,
        }
        for prompt in ("p1", "p2")
    ]
    return pl.DataFrame(
        rows,
        schema_overrides={
            "logprob": pl.Float64,
            "n_response_tokens": pl.Int32,
            "missing_reason": pl.String,
        },
    )


def _cell(frame: pl.DataFrame, index: str, family: str = "__all__", dataset: str = DATASET) -> dict:
    rows = frame.filter(
        (pl.col("index") == index) & (pl.col("family") == family) & (pl.col("dataset") == dataset)
    )
    assert rows.height == 1, (index, family, dataset)
    return rows.row(0, named=True)


def test_the_table_matches_hand_computations() -> None:
    table = peer_metrics_on_few(_instances(), _deltas(), _analysis())
    assert table.schema == pl.Schema(PEER_METRICS)
    # 1 model x (dataset d, __pooled__) x (__all__, noise, register) x 8 indices
    assert table.height == 2 * 3 * 8

    # PSS on correctness (Y in {0, 1}, the base prompt one of the N prompts):
    # p1: Y = base 1, n1 0, n2 1, r1 0: 4 of the 6 pairs differ -> 4/6
    # p2: Y = 0, 0, 1, 0: 3 of 6 pairs differ -> 3/6; mean over instances (4/6 + 3/6) / 2
    assert _cell(table, "pss_correct")["value"] == pytest.approx((4 / 6 + 3 / 6) / 2)
    assert _cell(table, "pss_correct")["n"] == 2
    # noise only: p1 {1, 0, 1} -> 2/3, p2 {0, 0, 1} -> 2/3
    assert _cell(table, "pss_correct", "noise")["value"] == pytest.approx(2 / 3)
    # register only: p1 {1, 0} -> 1, p2 {0, 0} -> 0
    assert _cell(table, "pss_correct", "register")["value"] == pytest.approx(0.5)

    # PSS on BERTScore against the base answer (the base's own is 1):
    # p1: Y = 1, 0.8, 0.9, 0.5: gaps .2 .1 .5 .1 .3 .4 = 1.6 / 6
    # p2: Y = 1, (n1 none), 1.0, 0.7: gaps 0 .3 .3 = 0.6 / 3
    bert = _cell(table, "pss_bert_to_base")
    assert bert["value"] == pytest.approx((1.6 / 6 + 0.6 / 3) / 2)
    assert bert["coverage"] is not None and "against the base answer" in bert["coverage"]
    # named for what it is, so no one sets it beside ProSA's published PSS
    assert "pss_bertscore" not in table["index"].to_list()
    assert "not comparable with ProSA's published PSS" in bert["coverage"]
    assert "not ProSA's PSS" in bert["source"]

    # POSIX's base column: p1: |-10+12|/4 = .5, |-15+12|/4 = .75, |-12+12|/4 = 0 -> 1.25/3
    # p2 (L = 2): |-9+8|/2 = .5, (n2 none), |-5+8|/2 = 1.5 -> 1.0; mean (1.25/3 + 1) / 2
    posix = _cell(table, "posix_base_column")
    assert posix["value"] == pytest.approx((1.25 / 3 + 1.0) / 2)
    assert "N-1 of the N(N-1) ordered pairs" in posix["coverage"]
    assert "not the paper's POSIX" in posix["source"]
    # noise: p1 (.5 + .75) / 2 = .625, p2 .5 -> .5625; register: p1 0, p2 1.5 -> .75
    assert _cell(table, "posix_base_column", "noise")["value"] == pytest.approx(0.5625)
    assert _cell(table, "posix_base_column", "register")["value"] == pytest.approx(0.75)
    # the paper's POSIX needs the full matrix, off by default: NA with the reason
    full = _cell(table, "posix")
    assert full["value"] is None and full["missing_reason"] == NO_MATRIX

    # PDR per variant (the attack), over the instances, then the mean over variants:
    # n1: base right 1 (p1), variant 0 -> 1 - 0/1 = 1; n2: base 1, variant 2 -> 1 - 2 = -1;
    # r1: base 1, variant 0 -> 1; mean (1 - 1 + 1) / 3
    assert _cell(table, "pdr")["value"] == pytest.approx(1 / 3)
    assert _cell(table, "pdr")["n"] == 3
    assert _cell(table, "pdr", "noise")["value"] == pytest.approx(0.0)
    assert _cell(table, "pdr", "register")["value"] == pytest.approx(1.0)

    # MaxP / AvgP / CPS over the templates base, n1, n2, r1 with accuracies
    # base (1 + 0)/2 = .5, n1 0, n2 1, r1 0: MaxP 1, AvgP 1.5/4 = .375,
    # CPS = (1 - (1 - .375)) * 1 = .375
    assert _cell(table, "max_p")["value"] == pytest.approx(1.0)
    assert _cell(table, "avg_p")["value"] == pytest.approx(0.375)
    assert _cell(table, "cps")["value"] == pytest.approx(0.375)
    assert _cell(table, "cps")["n"] == 4
    # register: base .5, r1 0: MaxP .5, AvgP .25, CPS (1 - .25) * .5 = .375
    assert _cell(table, "cps", "register")["value"] == pytest.approx(0.375)

    # one dataset: the pooled rows equal the dataset's
    for index in ("pss_correct", "pss_bert_to_base", "posix_base_column", "pdr", "cps"):
        assert _cell(table, index, dataset="__pooled__")["value"] == pytest.approx(
            _cell(table, index)["value"]
        )
    assert table.filter(pl.col("index") != "posix")["missing_reason"].null_count() == 7 * 6
    assert {r["source"] for r in table.iter_rows(named=True)} >= {
        "ProSA PSS, Zhuo et al. 2024 (arXiv:2410.12405)",
        "POSIX, Chatterjee et al. 2024 (arXiv:2410.02185)",
    }


def _values_are_numbers_or_na(table: pl.DataFrame) -> None:
    for row in table.iter_rows(named=True):
        if row["value"] is None:
            assert row["missing_reason"], row
        else:
            assert math.isfinite(row["value"]) and row["missing_reason"] is None, row


def test_no_references_and_no_log_probabilities_are_na_with_their_reason() -> None:
    unknown = {key: (None, None) for key in VERDICTS}
    api = {key: None for key in LOGPROBS}
    table = peer_metrics_on_few(
        _instances(unknown, reason="NO_GOLD_ALPACA"),
        _deltas(),
        _analysis(api, reason="backend litellm cannot teacher-force"),
    )
    _values_are_numbers_or_na(table)
    for index in ("pss_correct", "pdr", "max_p", "avg_p", "cps"):
        cell = _cell(table, index)
        assert cell["value"] is None and cell["missing_reason"] == "NO_GOLD_ALPACA", index
    posix = _cell(table, "posix_base_column")
    assert posix["value"] is None
    assert posix["missing_reason"] == "backend litellm cannot teacher-force"
    assert _cell(table, "pss_bert_to_base")["value"] is not None  # needs no reference

    without_analysis = peer_metrics_on_few(_instances(), _deltas(), None)
    assert _cell(without_analysis, "posix_base_column")["missing_reason"] == NO_ANALYSIS


def test_a_base_never_right_leaves_pdr_na_not_infinite() -> None:
    never = {key: (False, right) for key, (_, right) in VERDICTS.items()}
    table = peer_metrics_on_few(_instances(never), _deltas(), _analysis())
    _values_are_numbers_or_na(table)
    cell = _cell(table, "pdr")
    assert cell["value"] is None and cell["missing_reason"] == BASE_NEVER_RIGHT
    # MaxP still exists: base 0, n1 0, n2 1, r1 0 -> MaxP 1, AvgP .25, CPS .25
    assert _cell(table, "cps")["value"] == pytest.approx(0.25)


def test_a_second_dataset_is_pooled_over_instances() -> None:
    second = _instances().with_columns(
        pl.lit("e").alias("dataset"), pl.lit(True).alias("variant_correct")
    )
    deltas = pl.concat([_deltas(), _deltas().with_columns(pl.lit("e").alias("dataset"))])
    analysis = pl.concat([_analysis(), _analysis().with_columns(pl.lit("e").alias("dataset"))])
    table = peer_metrics_on_few(pl.concat([_instances(), second]), deltas, analysis)
    # e: p1 Y = 1, 1, 1, 1 -> 0; p2 Y = 0, 1, 1, 1 -> 3/6. Pooled over the four instances:
    # (4/6 + 3/6 + 0 + 3/6) / 4
    pooled = _cell(table, "pss_correct", dataset="__pooled__")
    assert pooled["value"] == pytest.approx((4 / 6 + 3 / 6 + 0 + 3 / 6) / 4)
    assert pooled["n"] == 4


def _with_n3(prompt: str, right: bool, base: bool) -> pl.DataFrame:
    """The standard instances plus a noise template n3 answered on ``prompt`` only."""
    extra = _instances({(prompt, "n1"): (base, right)}).with_columns(
        pl.lit("n3").alias("variant_id")
    )
    return pl.concat([_instances(), extra])


def test_templates_are_compared_on_the_instances_every_template_answered() -> None:
    table = peer_metrics_on_few(_with_n3("p2", True, False), _deltas(), _analysis())
    # n3 answers p2 only: every template over p2 alone: base 0, n1 0, n2 1, r1 0, n3 1.
    # AvgP 2/5 (over each template's own instances it would be (.5 + 0 + 1 + 0 + 1) / 5 = .5)
    assert _cell(table, "avg_p")["value"] == pytest.approx(2 / 5)
    assert _cell(table, "max_p")["value"] == pytest.approx(1.0)
    # PDR on p2 only, where the base is never right: no rate
    assert _cell(table, "pdr")["missing_reason"] == BASE_NEVER_RIGHT


def test_a_template_on_an_instance_of_its_own_sets_no_max_p() -> None:
    # n3 answers only p3, where no other variant was asked: no instance is shared
    table = peer_metrics_on_few(_with_n3("p3", True, True), _deltas(), _analysis())
    for index in ("max_p", "avg_p", "cps", "pdr"):
        cell = _cell(table, index)
        assert cell["value"] is None, index
        assert cell["missing_reason"] == "no instance answered under every template", index


def test_a_model_without_analysis_rows_is_no_analysis() -> None:
    other = _analysis().with_columns(pl.lit("mock:other").alias("model"))
    table = peer_metrics_on_few(_instances(), _deltas(), other)
    assert _cell(table, "posix_base_column")["missing_reason"] == NO_ANALYSIS


def test_templates_sharing_fewer_than_five_instances_are_not_compared() -> None:
    # the default: the fixture's templates share two instances (p1, p2), fewer than five,
    # so a template right on both would otherwise read as MaxP = 1 from two answers
    table = peer_metrics(_instances(), _deltas(), _analysis())
    for index in ("max_p", "avg_p", "cps", "pdr"):
        cell = _cell(table, index)
        assert cell["value"] is None, index
        assert cell["missing_reason"] == few_shared(2, 5), index
    assert "2 instance(s)" in few_shared(2, 5) and "at least 5" in few_shared(2, 5)
    # the indices over each instance on its own stay (PSS needs no shared instances)
    assert _cell(table, "pss_correct")["value"] == pytest.approx((4 / 6 + 3 / 6) / 2)


def test_a_peer_table_written_before_the_rename_reads_under_the_new_name(tmp_path: Path) -> None:
    """``pss_bertscore`` became ``pss_bert_to_base``; an old peer_metrics.parquet
    still shows its value in the report's section and on the card."""
    from sago_core.artifacts.layout import PEER_METRICS_FILE
    from sago_core.report.card.build import _peer_indices
    from sago_core.report.sections.peer import peer_section

    old = peer_metrics_on_few(_instances(), _deltas(), _analysis()).with_columns(
        pl.col("index").replace({"pss_bert_to_base": "pss_bertscore"})
    )
    assert "pss_bertscore" in old["index"].to_list()
    summary = pl.DataFrame(
        {"model": [MODEL], "dataset": ["__pooled__"], "axis": ["bert"], "sgs": [0.25]}
    )
    page = peer_section(old, summary)
    value = _cell(old, "pss_bertscore", dataset="__pooled__")["value"]
    assert "PSS form, BERT to base" in page and f"<td>{value:.4f}</td>" in page
    old.write_parquet(tmp_path / PEER_METRICS_FILE)
    rows = {r["index"]: r for r in _peer_indices(tmp_path, MODEL)["rows"]}
    assert rows["pss_bert_to_base"]["value"] == pytest.approx(value)
