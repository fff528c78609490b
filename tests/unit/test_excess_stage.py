"""The K > 1 stage on hand-built frames: sampling_tests, the deltas built from
the excesses, and the variance components; every expected number is worked out by hand in
the comments (d = |position(h) - position(r)| / 10 for BLEU, / 20 for BERTScore)."""

from __future__ import annotations

import math

import polars as pl
import pytest

from sago_core.artifacts.schemas import ANALYSIS, GENERATIONS, SAMPLE_ANALYSIS, SAMPLES, conform
from sago_core.sampling.axis_tests import sampling_tests
from sago_core.sampling.components import CROSSED, variance_components
from sago_core.sampling.excess_deltas import excess_deltas
from sago_core.vocabulary import BASE_VARIANT_ID, REPLAY_FAMILY, REPLAY_VARIANT_ID

# Each answer sits at a position; the stub similarities read it.
POSITION = {"alpha": 0, "beta": 2, "gamma  x": 4, "delta  x": 8}
NOISE = "noise:spacing:5:global"


class Stub:
    """Similarity from positions; counts the pairs it is asked."""

    def __init__(self, per: float, scale: float) -> None:
        self.per, self.scale, self.pairs, self.calls = per, scale, [], 0

    def __call__(self, hyps: list[str], refs: list[str]) -> list[float]:
        self.calls += 1
        self.pairs += list(zip(hyps, refs, strict=True))
        return [
            self.scale * (1 - abs(POSITION[h] - POSITION[r]) / self.per)
            for h, r in zip(hyps, refs, strict=True)
        ]


def _row(vid: str, family: str, subtype: str, strength: float, sample: int, answer: str) -> dict:
    return {
        "model": "m",
        "dataset": "d",
        "prompt_id": "p1",
        "variant_id": vid,
        "family": family,
        "subtype": subtype,
        "strength": strength,
        "position": "global",
        "prompt_text": "What is it?",
        "response_text": answer,
        "answer_text": answer,
        "response_token_ids": [1],
        "finish_reason": "stop",
        "failure_reason": None,
        "engine": "{}",
        "sample": sample,
        "seed": sample,
    }


def _samples(k: int = 2) -> pl.DataFrame:
    answers = {
        BASE_VARIANT_ID: ("base", "base", 0.0, ["alpha", "beta"]),
        NOISE: ("noise", "spacing", 5.0, ["gamma  x", "delta  x"]),
        REPLAY_VARIANT_ID: (REPLAY_FAMILY, "base", 0.0, ["beta", "alpha"]),
    }
    rows = [
        _row(vid, family, subtype, strength, i, texts[i])
        for vid, (family, subtype, strength, texts) in answers.items()
        for i in range(k)
    ]
    return conform(pl.DataFrame(rows), SAMPLES)


def _sample_analysis(k: int = 2) -> pl.DataFrame:
    values = {  # (logprob, mean entropy) of base sample j under each prompt text
        BASE_VARIANT_ID: [(-10.0, 1.0), (-12.0, 2.0)],
        NOISE: [(-11.0, 1.5), (-15.0, 2.5)],
        REPLAY_VARIANT_ID: [(-10.0, 1.0), (-12.0, 2.0)],
    }
    rows = [
        {
            "model": "m",
            "dataset": "d",
            "prompt_id": "p1",
            "variant_id": vid,
            "sample": j,
            "logprob": lp,
            "mean_entropy": ent,
            "n_response_tokens": 3,
            "missing_reason": None,
        }
        for vid, pairs in values.items()
        for j, (lp, ent) in enumerate(pairs[:k])
    ]
    return conform(pl.DataFrame(rows), SAMPLE_ANALYSIS)


PROMPTS = pl.DataFrame(
    {
        "dataset": ["d"],
        "prompt_id": ["p1"],
        "references": [["alpha"]],
        "reference_missing_reason": [None],
    }
)


def _tests(k: int = 2, **kwargs: object) -> tuple[pl.DataFrame, Stub, Stub]:
    bleu, bert = Stub(10, 100.0), Stub(20, 1.0)
    frame = sampling_tests(_samples(k), _sample_analysis(k), PROMPTS, bleu, bert, **kwargs)
    return frame, bleu, bert


def _one(frame: pl.DataFrame, vid: str, axis: str) -> dict:
    rows = frame.filter((pl.col("variant_id") == vid) & (pl.col("axis") == axis))
    assert rows.height == 1
    return rows.row(0, named=True)


def test_text_axes_excess_and_permutation_by_hand() -> None:
    frame, _, _ = _tests()
    bleu = _one(frame, NOISE, "bleu")
    # cross d(v, b): (4,0) .4, (4,2) .2, (8,0) .8, (8,2) .6 -> D .5; W_base .2, W_variant .4
    assert bleu["cross"] == pytest.approx(0.5)
    assert bleu["within_base"] == pytest.approx(0.2)
    assert bleu["within_variant"] == pytest.approx(0.4)
    assert bleu["excess"] == pytest.approx(0.2)  # .5 - (.2 + .4) / 2
    # the 6 splits of {4, 8, 0, 2}: E = .2 twice (observed, complement), -.1 four times
    assert bleu["p_value"] == pytest.approx(1 / 3) and bleu["p_method"] == "exact"
    assert bleu["min_p"] == pytest.approx(1 / 3)
    # scored against the held-out base sample 1 (value 2): d(4, 2) .2, d(8, 2) .6; the
    # base's cell is base sample 0: d(0, 2) .2 (no leave-one-out for the base)
    assert bleu["sample_scores"] == pytest.approx([0.2, 0.6])
    assert bleu["base_sample_scores"] == pytest.approx([0.2])
    bert = _one(frame, NOISE, "bert")
    assert bert["excess"] == pytest.approx(0.1)  # every d halved
    replay = _one(frame, REPLAY_VARIANT_ID, "bleu")
    # replay {2, 0} vs base {0, 2}: D = (.2 + 0 + 0 + .2) / 4 = .1, W = .2 each
    assert replay["excess"] == pytest.approx(-0.1)


def test_each_unique_pair_is_measured_once() -> None:
    _, bleu, bert = _tests()
    assert bleu.calls == 1 and bert.calls == 1
    # BLEU, ordered: base within 2, noise within 2, noise x base both orders 8 (the replay's
    # answers are the base's texts: nothing new)
    assert len(bleu.pairs) == 12 == len(set(bleu.pairs))
    # BERTScore, unordered: {a,b}, {g,d}, and the 4 noise x base pairs
    assert len(bert.pairs) == 6 == len({frozenset(p) for p in bert.pairs})


def test_teacher_forced_mirroring_flips_and_spread_by_hand() -> None:
    frame, _, _ = _tests()
    prob = _one(frame, NOISE, "prob")
    assert prob["mean_variant"] == pytest.approx(-13.0)  # (-11 - 15) / 2
    assert prob["mean_base"] == pytest.approx(-11.0)
    assert prob["excess"] == pytest.approx(-2.0 / 250)
    # differences -1, -3: |mean| over the 4 sign vectors 2, 1, 1, 2 -> p = 2 / 4
    assert prob["p_value"] == pytest.approx(0.5) and prob["p_method"] == "sign_flip_exact"
    assert _one(frame, NOISE, "ent")["excess"] == pytest.approx(0.5 / 10)
    mr = _one(frame, NOISE, "mr")
    # each noisy sample (one extra space) is flagged against each base sample; no base
    # sample against another: 1 - 0. Relabelling: 1 for the observed split only -> 1 / 6
    assert (mr["mean_variant"], mr["mean_base"], mr["excess"]) == (1.0, 0.0, 1.0)
    assert mr["p_value"] == pytest.approx(1 / 6)
    assert mr["sample_scores"] == [1.0, 1.0] and mr["base_sample_scores"] == [0.0]
    assert _one(frame, REPLAY_VARIANT_ID, "mr")["excess"] == 0.0
    # references ["alpha"]: base right, wrong; noise wrong, wrong
    assert mr["share_right_base"] == 0.5 and mr["share_right_variant"] == 0.0
    assert mr["flip_right_to_wrong"] == pytest.approx(0.5)  # 1 x 2 / (2 x 2)
    assert mr["self_flip"] == pytest.approx(0.5)  # 1 x 1 / (2 x 1)
    assert mr["flip_right_to_wrong_excess"] == pytest.approx(0.0)
    assert mr["flip_wrong_to_right_excess"] == pytest.approx(-0.5)
    # BERTScore similarity: base .9 (one meaning at .85), noise 1 - 4/20 = .8 (two)
    assert (mr["clusters_base"], mr["clusters_variant"]) == (1, 2)
    assert mr["entropy_base"] == 0.0 and mr["entropy_variant"] == pytest.approx(math.log(2))


def test_gaps_are_na_with_a_reason_never_zero() -> None:
    samples = _samples().with_columns(
        pl.when((pl.col("variant_id") == NOISE) & (pl.col("sample") == 1))
        .then(None)
        .otherwise(pl.col("answer_text"))
        .alias("answer_text")
    )
    analysis = _sample_analysis().with_columns(
        pl.when(pl.col("variant_id") == NOISE)
        .then(None)
        .otherwise(pl.col("logprob"))
        .alias("logprob"),
        pl.when(pl.col("variant_id") == NOISE)
        .then(pl.lit("api model: no logprobs"))
        .alias("missing_reason"),
    )
    frame = sampling_tests(
        samples, analysis, PROMPTS, Stub(10, 100.0), Stub(20, 1.0), judged_families=frozenset()
    )
    bleu = _one(frame, NOISE, "bleu")
    assert bleu["excess"] is None and "variant sample 1 has no answer" in bleu["missing_reason"]
    prob = _one(frame, NOISE, "prob")
    assert prob["excess"] is None and "no logprobs" in prob["missing_reason"]
    assert _one(frame, NOISE, "ent")["excess"] is not None
    judged = sampling_tests(
        _samples(),
        _sample_analysis(),
        PROMPTS,
        Stub(10, 100.0),
        Stub(20, 1.0),
        judged_families=frozenset({"noise"}),
    )
    mr = _one(judged, NOISE, "mr")
    assert mr["excess"] is None and "judge" in mr["missing_reason"]


def test_excess_deltas_signs_and_kept_act() -> None:
    frame, _, _ = _tests()
    act = pl.DataFrame(
        {
            "model": ["m", "m"],
            "dataset": ["d", "d"],
            "prompt_id": ["p1", "p1"],
            "variant_id": [NOISE, REPLAY_VARIANT_ID],
            "axis": ["act", "act"],
            "delta": [-0.25, 0.0],
            "delta_norm": [-0.125, 0.0],
            "missing_reason": [None, None],
        }
    )
    deltas = excess_deltas(frame, act)
    got = {
        (r["variant_id"], r["axis"]): (r["delta"], r["delta_norm"])
        for r in deltas.iter_rows(named=True)
    }
    assert got[(NOISE, "bleu")] == pytest.approx((-20.0, -0.2))
    assert got[(NOISE, "bert")] == pytest.approx((-0.1, -0.1))
    assert got[(NOISE, "prob")] == pytest.approx((-2.0, -2.0 / 250))
    assert got[(NOISE, "ent")] == pytest.approx((0.5, 0.05))
    assert got[(NOISE, "mr")] == (1.0, 1.0)
    assert got[(NOISE, "act")] == (-0.25, -0.125)
    assert deltas.filter(pl.col("variant_id") == NOISE)["family"].to_list() == ["noise"] * 6


def test_at_one_sample_the_deltas_are_todays() -> None:
    """K = 1: the deltas from the excesses equal compute_deltas' on the same answers."""
    from sago_core.scoring.deltas import compute_deltas
    from sago_core.stages.pairs import detect_mirroring_frame, score_pairs

    samples = _samples(k=1)
    generations = conform(samples, GENERATIONS)
    bleu, bert = Stub(10, 100.0), Stub(20, 1.0)
    tests = sampling_tests(samples, _sample_analysis(k=1), PROMPTS, bleu, bert)
    analysis = conform(
        _sample_analysis(k=1).with_columns(
            pl.lit(None, pl.List(pl.Float64)).alias("layer_cosines"),
            pl.lit(None, pl.List(pl.Float64)).alias("layer_cosines_user"),
            pl.lit(0.9).alias("act_cos_mean"),
        ),
        ANALYSIS,
    )
    answer = dict(zip(generations["variant_id"], generations["answer_text"], strict=True))
    scored = score_pairs(
        generations,
        lambda h, r: [1 - abs(POSITION[a] - POSITION[b]) / 20 for a, b in zip(h, r, strict=True)],
    )
    base = POSITION[answer[BASE_VARIANT_ID]]
    bleu_today = [100 * (1 - abs(POSITION[answer[v]] - base) / 10) for v in scored["variant_id"]]
    pairs = scored.with_columns(pl.Series("bleu", bleu_today, pl.Float64))
    today = compute_deltas(generations, analysis, pairs, detect_mirroring_frame(generations))
    mine = excess_deltas(tests, today)
    joined = today.join(mine, on=["variant_id", "axis"], suffix="_k")
    assert joined.height == today.height == mine.height
    for row in joined.iter_rows(named=True):
        assert row["delta_norm_k"] == pytest.approx(row["delta_norm"], abs=1e-12), row
        assert row["delta_k"] == pytest.approx(row["delta"], abs=1e-9), row


def test_variance_components_by_hand() -> None:
    """Two prompts, base and one variant each, K = 2 (textbook balanced nested ANOVA):
    cell means .2 .5 .2 .5, prompt means .35 .35; SS_variant = 2 x .15^2 x 4 = .18 (df 2),
    SS_sample = .08 + .02 = .10 (df 4): s2_sample = .025, s2_variant = (.09 - .025) / 2 =
    .0325, s2_prompt = (0 - .025 - 2 x .0325) / 4 < 0 -> 0; share .0325 / .0575."""

    def row(prompt: str, vid: str, family: str, scores: list[float], base: list[float]) -> dict:
        return {
            "model": "m",
            "dataset": "d",
            "prompt_id": prompt,
            "variant_id": vid,
            "family": family,
            "axis": "bleu",
            "missing_reason": None,
            "sample_scores": scores,
            "base_sample_scores": base,
        }

    tests = pl.DataFrame(
        [
            row("A", "v1", "noise", [0.3, 0.7], [0.2, 0.2]),
            row("B", "v1", "noise", [0.5, 0.5], [0.1, 0.3]),
            row("B", REPLAY_VARIANT_ID, REPLAY_FAMILY, [9.0, 9.0], [0.1, 0.3]),
            {**row("A", "v1", "noise", [], []), "axis": "prob", "sample_scores": None},
        ]
    )
    table = variance_components(tests, resamples=50)
    bleu = table.filter((pl.col("axis") == "bleu") & (pl.col("dataset") == "d")).row(0, named=True)
    assert bleu["s2_sample"] == pytest.approx(0.025)
    assert bleu["s2_variant"] == pytest.approx(0.0325)
    assert bleu["s2_prompt"] == 0.0 and bleu["truncated"] == "prompt"
    assert bleu["share"] == pytest.approx(0.0325 / 0.0575)
    assert (bleu["n_prompts"], bleu["n_variants"], bleu["n_samples"]) == (2, 4, 8)
    assert bleu["share_ci_low"] is None and bleu["ci_missing_reason"]
    prob = table.filter((pl.col("axis") == "prob") & (pl.col("dataset") == "d")).row(0, named=True)
    assert prob["share"] is None and prob["missing_reason"] == CROSSED


def test_a_prompt_after_a_hundred_unjudged_rows_keeps_its_flips() -> None:
    # Found in the full `--preset sampling` run: the open-ended prompts come first, and a frame
    # built from their rows (no flip columns) used to drop the flip columns of every later
    # prompt (polars inferred the columns from the first 100 rows), without a reason.
    def renamed(frame: pl.DataFrame, prompt: str) -> pl.DataFrame:
        return frame.with_columns(dataset=pl.lit("a_open"), prompt_id=pl.lit(prompt))

    opened = [f"q{i:02d}" for i in range(12)]  # 12 prompts x 2 variants x 5 axes = 120 rows
    samples = pl.concat([*(renamed(_samples(), p) for p in opened), _samples()])
    analysis = pl.concat([*(renamed(_sample_analysis(), p) for p in opened), _sample_analysis()])
    unjudged = pl.DataFrame(
        {
            "dataset": ["a_open"] * len(opened),
            "prompt_id": opened,
            "references": [[]] * len(opened),
            "reference_missing_reason": ["open-ended"] * len(opened),
        },
        schema_overrides={"references": pl.List(pl.String), "reference_missing_reason": pl.String},
    )
    prompts = pl.concat([unjudged, PROMPTS], how="vertical_relaxed")
    frame = sampling_tests(samples, analysis, prompts, Stub(10, 100.0), Stub(20, 1.0))
    assert frame.filter(pl.col("dataset") == "a_open").height == 120
    mr = frame.filter((pl.col("dataset") == "d") & (pl.col("variant_id") == NOISE))
    mr = mr.filter(pl.col("axis") == "mr").row(0, named=True)
    assert mr["share_right_base"] == 0.5 and mr["flip_right_to_wrong"] == pytest.approx(0.5)
    assert mr["flip_missing_reason"] is None
    opened_row = _one(frame.filter(pl.col("prompt_id") == "q00"), NOISE, "mr")
    assert opened_row["flip_missing_reason"] == "open-ended"
    assert opened_row["share_right_base"] is None
