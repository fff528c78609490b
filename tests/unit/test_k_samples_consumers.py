"""K > 1 samples per prompt text: instances, tails and the peer indices use
every sample (shares of right samples, flips beyond the base's self-flip rate, the replay as
the noise) instead of sample 0's verdicts, and say NA with a reason where an index has no
meaning. Every expected value is worked out by hand in the comments, at K = 3."""

from __future__ import annotations

import polars as pl
import pytest

from sago_core.peer_metrics.sources import (
    AVG_P,
    CPS,
    MAX_P,
    PDR,
    POSIX,
    POSIX_BASE_COLUMN,
    PSS_BERT_TO_BASE,
    PSS_CORRECT,
)
from sago_core.peer_metrics.table import peer_metrics
from sago_core.sampling.flips import flip_excess
from sago_core.stages.instances import (
    MR_INTENSITY_AT_K,
    SAMPLED_COLUMNS,
    build_instances,
    sampled_instances_schema,
)
from sago_core.statistics.tails import ALL_FAMILIES, subtype_flips, tail_statistics
from sago_core.vocabulary import REPLAY_FAMILY, REPLAY_VARIANT_ID
from tests.unit.test_tails import raw_run

T, F = True, False
NO_REFS = "no reference answers"

# d1/p0 at K = 3, the verdicts of each sample:
#   base [T, T, F]: share 2/3; self-flip (right i, wrong j != i) = 2 x 1 / (3 x 2) = 1/3
#   noise:0 [F, F, T]: share 1/3; right->wrong pairs 2 x 2 / 9 = 4/9, excess 4/9 - 1/3 = 1/9
#                      wrong->right 1 x 1 / 9 = 1/9, excess 1/9 - 1/3 = -2/9
#   register:0 [F, F, F]: share 0; right->wrong 2 x 3 / 9 = 2/3, excess 1/3
#                         wrong->right 0, excess -1/3
#   replay [T, F, F]: share 1/3
HAND = {
    "noise:0": ("noise", 1 / 3, 1 / 9, -2 / 9),
    "register:0": ("register", 0.0, 1 / 3, -1 / 3),
    REPLAY_VARIANT_ID: (REPLAY_FAMILY, 1 / 3, 0.0, -1 / 3),  # replay's flips: not read
}


def _sampling_tests() -> pl.DataFrame:
    """sampling_tests rows as the sampling stage writes them (two axis rows per variant,
    the flip columns repeated); d2 has no references, so its flips are null with a reason."""
    rows = []
    for vid, (family, share, to_wrong, to_right) in HAND.items():
        for axis in ("bleu", "bert"):
            common: dict[str, object] = {"model": "m", "prompt_id": "p0", "variant_id": vid}
            common |= {"family": family, "axis": axis, "k_base": 3, "k_variant": 3}
            rows.append(
                {
                    **common,
                    "dataset": "d1",
                    "share_right_base": 2 / 3,
                    "share_right_variant": share,
                    "self_flip": 1 / 3,
                    "flip_right_to_wrong_excess": to_wrong,
                    "flip_wrong_to_right_excess": to_right,
                    "flip_missing_reason": None,
                }
            )
            rows.append({**common, "dataset": "d2", "flip_missing_reason": NO_REFS})
    return pl.DataFrame(rows, schema_overrides={c: t for c, t in SAMPLED_COLUMNS.items()})


def test_the_hand_flip_excesses_are_the_sampling_stages() -> None:
    # the arithmetic above against sampling/flips.py, which wrote sampling_tests
    base = [T, T, F]
    assert flip_excess(base, [F, F, T]).right_to_wrong_excess == pytest.approx(1 / 9)
    assert flip_excess(base, [F, F, T]).wrong_to_right_excess == pytest.approx(-2 / 9)
    assert flip_excess(base, [F, F, F]).right_to_wrong_excess == pytest.approx(1 / 3)


@pytest.fixture(scope="module")
def sampled() -> pl.DataFrame:
    raw = raw_run(prompts=1, per_family=1)
    return build_instances(raw["deltas"], raw["generations"], raw["prompts"], _sampling_tests())


def test_instances_carry_every_samples_flips_beyond_self_flips(sampled: pl.DataFrame) -> None:
    assert sampled.schema == pl.Schema(sampled_instances_schema())
    d1 = {
        r["variant_id"]: r for r in sampled.filter(pl.col("dataset") == "d1").iter_rows(named=True)
    }
    assert set(d1) == {"noise:0", "register:0"}  # the replay is no instance
    noise, register = d1["noise:0"], d1["register:0"]
    assert (noise["k_base"], noise["k_variant"]) == (3, 3)
    assert noise["share_right_base"] == pytest.approx(2 / 3)
    assert noise["share_right_variant"] == pytest.approx(1 / 3)
    assert noise["self_flip"] == pytest.approx(1 / 3)
    assert noise["flip_right_to_wrong_excess"] == pytest.approx(1 / 9)
    assert noise["flip_wrong_to_right_excess"] == pytest.approx(-2 / 9)
    assert register["flip_right_to_wrong_excess"] == pytest.approx(1 / 3)
    # the replay's share, per prompt, on every variant's row
    assert noise["share_right_replay"] == register["share_right_replay"] == pytest.approx(1 / 3)
    # graded on one sampled answer: NA at K > 1, with its reason, never 0
    assert sampled["mr_intensity"].null_count() == sampled.height
    assert (sampled["mr_intensity_reason"] == MR_INTENSITY_AT_K).all()
    d2 = sampled.filter(pl.col("dataset") == "d2")
    assert d2["flip_right_to_wrong_excess"].null_count() == d2.height
    assert (d2["flip_missing_reason"] == NO_REFS).all()


def test_tails_flips_are_the_mean_excess_over_samples_not_sample_0(sampled: pl.DataFrame) -> None:
    tails = tail_statistics(sampled, resamples=50).filter(pl.col("axis") == "bleu")

    def row(dataset: str, family: str) -> dict:
        chosen = tails.filter((pl.col("dataset") == dataset) & (pl.col("family") == family))
        return chosen.row(0, named=True)

    every = row("d1", ALL_FAMILIES)
    # mean over the two judged variants: (1/9 + 1/3) / 2 = 2/9 and (-2/9 - 1/3) / 2 = -5/18
    assert every["n_judged"] == 2
    assert every["flip_right_to_wrong"] == pytest.approx(2 / 9)
    assert every["flip_wrong_to_right"] == pytest.approx(-5 / 18)
    assert row("d1", "noise")["flip_right_to_wrong"] == pytest.approx(1 / 9)
    no_refs = row("d2", ALL_FAMILIES)
    assert no_refs["flip_right_to_wrong"] is None and no_refs["n_judged"] == 0
    assert no_refs["flip_missing_reason"] == NO_REFS


def test_per_subtype_flips_are_over_samples_too(sampled: pl.DataFrame) -> None:
    (noise,) = subtype_flips(sampled, "noise").iter_rows(named=True)
    # noise:0 on d1 (judged) and d2 (no references): excesses 1/9 and -2/9 of d1 alone,
    # shares of right samples 2/3 (base) and 1/3 (variant)
    assert (noise["n"], noise["n_judged"]) == (2, 1)
    assert noise["flip_right_to_wrong"] == pytest.approx(1 / 9)
    assert noise["flip_wrong_to_right"] == pytest.approx(-2 / 9)
    assert noise["base_correct"] == pytest.approx(2 / 3)
    assert noise["variant_correct"] == pytest.approx(1 / 3)
    assert noise["flip_missing_reason"] is None
    d2 = subtype_flips(sampled.filter(pl.col("dataset") == "d2"), "noise").row(0, named=True)
    assert d2["flip_right_to_wrong"] is None and d2["flip_missing_reason"] == NO_REFS


# Two instances at K = 3, the share of right samples per prompt (base, v1, v2; replay):
#   p1: 2/3, 1/3, 1;    replay 1/3
#   p2: 1,   2/3, 1/3;  replay 1
# Sample 0 is right everywhere: at K = 1 every index would say "no sensitivity".
SHARES = {"p1": (2 / 3, 1 / 3, 1.0, 1 / 3), "p2": (1.0, 2 / 3, 1 / 3, 1.0)}


def _peer_inputs() -> tuple[pl.DataFrame, pl.DataFrame]:
    instances, deltas = [], []
    for pid, (base, v1, v2, replay) in SHARES.items():
        for vid, share in (("v1", v1), ("v2", v2)):
            key = {"model": "m", "dataset": "d", "prompt_id": pid, "variant_id": vid}
            instances.append(
                {
                    **key,
                    "family": "noise",
                    "base_correct": True,
                    "variant_correct": True,
                    "correct_missing_reason": None,
                    "k_base": 3,
                    "share_right_base": base,
                    "share_right_variant": share,
                    "share_right_replay": replay,
                    "flip_missing_reason": None,
                }
            )
            # the bert delta at K > 1 is -E, an excess: no BERTScore to read PSS from
            deltas.append(
                {**key, "family": "noise", "axis": "bert", "delta": -0.2, "missing_reason": None}
            )
    return pl.DataFrame(instances), pl.DataFrame(deltas)


def test_peer_indices_over_samples_with_the_replay_as_the_noise() -> None:
    instances, deltas = _peer_inputs()
    table = peer_metrics(instances, deltas, None, min_shared=1)
    rows = {
        r["index"]: r
        for r in table.filter(
            (pl.col("dataset") == "d") & (pl.col("family") == ALL_FAMILIES)
        ).iter_rows(named=True)
    }
    # PSS: p1 gaps |2/3-1/3| 1/3, |2/3-1| 1/3, |1/3-1| 2/3 -> 4/9; p2 1/3, 2/3, 1/3 -> 4/9
    assert rows[PSS_CORRECT]["value"] == pytest.approx(4 / 9)
    # noise: |Y_base - Y_replay| = 1/3 (p1) and 0 (p2) -> 1/6
    assert "K = 3" in rows[PSS_CORRECT]["coverage"]
    assert "mean |Y_base - Y_replay| = 0.167" in rows[PSS_CORRECT]["coverage"]
    # PDR: v1 1 - (1/3 + 2/3) / (2/3 + 1) = 2/5; v2 1 - (1 + 1/3) / (5/3) = 1/5 -> 3/10
    assert rows[PDR]["value"] == pytest.approx(3 / 10)
    # the replay's PDR: 1 - (1/3 + 1) / (5/3) = 1/5
    assert "the replay's PDR = 0.200" in rows[PDR]["coverage"]
    # accuracies: base (2/3 + 1)/2 = 5/6, v1 1/2, v2 2/3: MaxP 5/6, AvgP 2/3,
    # CPS (1 - (5/6 - 2/3)) x 5/6 = 25/36
    assert rows[MAX_P]["value"] == pytest.approx(5 / 6)
    assert rows[AVG_P]["value"] == pytest.approx(2 / 3)
    assert rows[CPS]["value"] == pytest.approx(25 / 36)
    for index in (PSS_BERT_TO_BASE, POSIX, POSIX_BASE_COLUMN):  # NA with its reason
        assert rows[index]["value"] is None
    assert rows[PSS_BERT_TO_BASE]["missing_reason"].startswith("not defined at K > 1: ")
    assert rows[POSIX_BASE_COLUMN]["missing_reason"].startswith("not computed at K > 1: ")
    assert rows[POSIX]["missing_reason"].startswith("the full matrix was not computed")


def test_the_noise_says_why_it_is_missing() -> None:
    instances, deltas = _peer_inputs()
    # no replay verdicts: the noise is not measured, and the row says so
    no_replay = instances.with_columns(pl.lit(None, pl.Float64).alias("share_right_replay"))
    table = peer_metrics(no_replay, deltas, None, min_shared=1)
    pss_row = table.filter((pl.col("index") == PSS_CORRECT) & (pl.col("dataset") == "d"))
    assert "noise not measured" in pss_row["coverage"][0]
    # a base never right: the replay's PDR divides by 0
    never = instances.with_columns(pl.lit(0.0).alias("share_right_base"))
    table = peer_metrics(never, deltas, None, min_shared=1)
    pdr_row = table.filter((pl.col("index") == PDR) & (pl.col("dataset") == "d")).row(0, named=True)
    assert pdr_row["value"] is None and "never right" in pdr_row["missing_reason"]
    assert "the replay's PDR is undefined" in pdr_row["coverage"]


# POSIX over the K base answers (sample_analysis: each base sample's answer teacher-forced
# under every prompt; L its tokens), psi = mean over variants of |lp_v - lp_base| / L:
#   p1 sample 0: base -12 (L 4), v1 -10, v2 -15: (2/4 + 3/4) / 2 = 0.625
#      sample 1: base -8 (L 2), v1 -8, v2 -9: (0 + 1/2) / 2 = 0.25
#      sample 2: base -6 (L 3), v1 -9, v2 -6: (1 + 0) / 2 = 0.5   -> p1: 1.375 / 3 = 11/24
#   p2 samples 0 and 2: base -4 (L 2), v1 -4, v2 -4: 0
#      sample 1: base -4 (L 2), v1 -6, v2 -2: (1 + 1) / 2 = 1      -> p2: 1/3
# POSIX = (11/24 + 8/24) / 2 = 19/48 (sample 0 alone would give (0.625 + 0) / 2 = 0.3125)
FORCED = {
    ("p1", 0): (4, -12.0, -10.0, -15.0),
    ("p1", 1): (2, -8.0, -8.0, -9.0),
    ("p1", 2): (3, -6.0, -9.0, -6.0),
    ("p2", 0): (2, -4.0, -4.0, -4.0),
    ("p2", 1): (2, -4.0, -6.0, -2.0),
    ("p2", 2): (2, -4.0, -4.0, -4.0),
}


def test_posix_averages_psi_over_the_base_samples() -> None:
    instances, deltas = _peer_inputs()
    rows = [
        {
            "model": "m",
            "dataset": "d",
            "prompt_id": pid,
            "variant_id": vid,
            "sample": sample,
            "logprob": lp,
            "n_response_tokens": tokens,
            "missing_reason": None,
        }
        for (pid, sample), (tokens, *lps) in FORCED.items()
        for vid, lp in zip(("base", "v1", "v2"), lps, strict=True)
    ]
    table = peer_metrics(instances, deltas, pl.DataFrame(rows), min_shared=1)
    column = (pl.col("index") == POSIX_BASE_COLUMN) & (pl.col("dataset") == "d")
    posix = table.filter(column).row(0, named=True)
    assert posix["value"] == pytest.approx(19 / 48)
    assert posix["n"] == 2 and "K = 3" in posix["coverage"]
