"""tails.parquet against numpy on hand-built raw deltas: quantiles, shares, flip rates and
their bootstrap intervals (a plain resampling loop, np.quantile on the repeated sample)."""

from __future__ import annotations

import re

import numpy as np
import polars as pl
import pytest

from sago_core.data.prompt import NO_REASON_RECORDED
from sago_core.stages.instances import build_instances
from sago_core.statistics.intervals import MIN_PROMPTS, interval_refusal, stable_seed
from sago_core.statistics.tails import (
    ALL_FAMILIES,
    FLIP_SEED,
    prompt_weights,
    tail_statistics,
    weighted_quantiles,
)
from sago_core.vocabulary import AXES, POOLED, REPLAY_FAMILY, REPLAY_VARIANT_ID

RIGHT, WRONG = "It is Paris.", "It is Rome."
DATASETS = {"d1": ["Paris"], "d2": []}  # d2 has no reference answers
FAMILIES = ("noise", "register")


def raw_run(seed: int = 7, prompts: int = 5, per_family: int = 4) -> dict[str, pl.DataFrame]:
    """Deltas, generations and prompts of one model, built by hand (replay rows included,
    with huge deltas a leak would show)."""
    rng = np.random.default_rng(seed)
    deltas, gens, prompt_rows = [], [], []
    for dataset, refs in DATASETS.items():
        for p in range(prompts):
            pid = f"p{p}"
            prompt_rows.append({"dataset": dataset, "prompt_id": pid, "references": refs})
            base_answer = RIGHT if rng.random() < 0.6 else WRONG
            gens.append((dataset, pid, "base", f"Capital of X{p}?", base_answer))
            variants = [(f"{f}:{i}", f, float(i + 1)) for f in FAMILIES for i in range(per_family)]
            for vid, family, strength in [*variants, (REPLAY_VARIANT_ID, REPLAY_FAMILY, 0.0)]:
                answer = RIGHT if rng.random() < 0.5 else WRONG
                gens.append((dataset, pid, vid, f"Capital  of X{p}?!", answer))
                for axis in AXES:
                    value = 9.0 if family == REPLAY_FAMILY else float(rng.normal(0, 0.1))
                    gone = family != REPLAY_FAMILY and rng.random() < 0.1
                    deltas.append(
                        {
                            "model": "m",
                            "dataset": dataset,
                            "prompt_id": pid,
                            "variant_id": vid,
                            "family": family,
                            "subtype": "spacing" if family == "noise" else "politeness",
                            "strength": strength,
                            "position": "global",
                            "axis": axis,
                            "delta": None if gone else value,
                            "delta_norm": None if gone else value,
                            "missing_reason": "gone" if gone else None,
                        }
                    )
    generations = pl.DataFrame(
        [
            {
                "model": "m",
                "dataset": d,
                "prompt_id": p,
                "variant_id": v,
                "prompt_text": t,
                "response_text": a,
                "answer_text": a,
            }
            for d, p, v, t, a in gens
        ]
    )
    return {
        "deltas": pl.DataFrame(deltas, schema_overrides={"delta_norm": pl.Float64}),
        "generations": generations,
        "prompts": pl.DataFrame(prompt_rows, schema_overrides={"references": pl.List(pl.String)}),
    }


def _variants(raw: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """Independent of sago: one row per kept variant with its two hand-made verdicts."""
    g = raw["generations"]
    base = g.filter(pl.col("variant_id") == "base").select(
        "dataset", "prompt_id", pl.col("answer_text").alias("base")
    )
    return (
        g.filter(~pl.col("variant_id").is_in(["base", REPLAY_VARIANT_ID]))
        .join(base, on=["dataset", "prompt_id"])
        .with_columns(
            pl.col("variant_id").str.split(":").list.first().alias("family"),
            (pl.col("base") == RIGHT).alias("base_right"),
            (pl.col("answer_text") == RIGHT).alias("variant_right"),
        )
    )


@pytest.fixture(scope="module")
def run() -> tuple[dict[str, pl.DataFrame], pl.DataFrame]:
    raw = raw_run()
    instances = build_instances(raw["deltas"], raw["generations"], raw["prompts"])
    return raw, tail_statistics(instances, resamples=300)


def _row(tails: pl.DataFrame, dataset: str, axis: str, family: str) -> dict:
    chosen = tails.filter(
        (pl.col("dataset") == dataset) & (pl.col("axis") == axis) & (pl.col("family") == family)
    )
    assert chosen.height == 1
    return chosen.row(0, named=True)


def test_quantiles_max_and_shares_match_numpy_on_the_raw_deltas(run) -> None:
    raw, tails = run
    deltas = raw["deltas"].filter(pl.col("family") != REPLAY_FAMILY).drop_nulls("delta_norm")
    for dataset in ("d1", "d2", POOLED):
        for family in (*FAMILIES, ALL_FAMILIES):
            for axis in AXES:
                chosen = deltas.filter(pl.col("axis") == axis)
                if dataset != POOLED:
                    chosen = chosen.filter(pl.col("dataset") == dataset)
                if family != ALL_FAMILIES:
                    chosen = chosen.filter(pl.col("family") == family)
                x = np.abs(chosen["delta_norm"].to_numpy())
                row = _row(tails, dataset, axis, family)
                assert row["n"] == len(x)
                q50, q90, q99 = np.quantile(x, [0.5, 0.9, 0.99])
                assert row["q50"] == pytest.approx(q50, rel=1e-12)
                assert row["q90"] == pytest.approx(q90, rel=1e-12)
                assert row["q99"] == pytest.approx(q99, rel=1e-12)
                assert row["max"] == x.max() < 9.0  # the replay's 9.0 never enters
                assert row["share_over_0_01"] == pytest.approx((x > 0.01).mean())
                assert row["share_over_0_05"] == pytest.approx((x > 0.05).mean())
                assert row["share_over_0_10"] == pytest.approx((x > 0.10).mean())
                assert row["missing_reason"] is None


def test_flip_rates_are_counted_apart_and_null_without_references(run) -> None:
    raw, tails = run
    variants = _variants(raw)
    for dataset in ("d1", POOLED):
        for family in (*FAMILIES, ALL_FAMILIES):
            chosen = variants.filter(pl.col("dataset") == "d1")  # d2 has no references
            if family != ALL_FAMILIES:
                chosen = chosen.filter(pl.col("family") == family)
            base = chosen["base_right"].to_numpy()
            var = chosen["variant_right"].to_numpy()
            for axis in AXES:
                row = _row(tails, dataset, axis, family)
                assert row["n_judged"] == len(base)
                assert row["flip_right_to_wrong"] == pytest.approx(np.mean(base & ~var))
                assert row["flip_wrong_to_right"] == pytest.approx(np.mean(~base & var))
                assert row["flip_missing_reason"] is None
    either = variants.filter(pl.col("dataset") == "d1")
    assert (either["base_right"] & ~either["variant_right"]).sum() > 0  # not all zero
    for axis in AXES:
        row = _row(tails, "d2", axis, ALL_FAMILIES)
        assert row["flip_right_to_wrong"] is None and row["flip_wrong_to_right"] is None
        assert row["ci_low_flip_right_to_wrong"] is None
        # d2's prompts have no references and raw_run's prompts no recorded reason
        assert row["flip_missing_reason"] == NO_REASON_RECORDED and row["n_judged"] == 0


def _loop_bootstrap(groups: list[list[np.ndarray]], seed: int, resamples: int) -> np.ndarray:
    """A plain resampling loop over prompts, the documented draw order (one group: all the
    subset's prompts, pooled row included)."""
    rng = np.random.default_rng(seed)
    picks = [rng.integers(0, len(g), size=(resamples, len(g))) for g in groups]
    out = []
    for r in range(resamples):
        sample = np.concatenate([g[i] for g, p in zip(groups, picks, strict=True) for i in p[r]])
        out.append(np.quantile(sample, [0.5, 0.9, 0.99]))
    return np.array(out)


def test_quantile_intervals_equal_a_plain_bootstrap_loop_over_prompts(run) -> None:
    raw, tails = run
    deltas = raw["deltas"].filter(pl.col("family") != REPLAY_FAMILY)
    axis = "bleu"
    for dataset in ("d1", POOLED):
        chosen = deltas.filter(pl.col("axis") == axis)
        if dataset != POOLED:
            chosen = chosen.filter(pl.col("dataset") == dataset)
        prompts = []
        for d in sorted(chosen["dataset"].unique()):
            per = chosen.filter(pl.col("dataset") == d)
            prompts += [
                np.abs(per.filter(pl.col("prompt_id") == p)["delta_norm"].drop_nulls())
                .to_numpy()
                .astype(float)
                for p in sorted(per["prompt_id"].unique())
            ]
        draws = _loop_bootstrap([prompts], stable_seed("m", dataset, axis, ALL_FAMILIES), 300)
        low, high = np.percentile(draws, [2.5, 97.5], axis=0)
        row = _row(tails, dataset, axis, ALL_FAMILIES)
        for i, name in enumerate(("q50", "q90", "q99")):
            assert row[f"ci_low_{name}"] == pytest.approx(low[i], rel=1e-9)
            assert row[f"ci_high_{name}"] == pytest.approx(high[i], rel=1e-9)
            assert row[f"ci_low_{name}"] <= row[name] <= row[f"ci_high_{name}"]


def test_flip_intervals_resample_prompts_as_a_ratio_of_counts(run) -> None:
    raw, tails = run
    variants = _variants(raw).filter(pl.col("dataset") == "d1")
    prompts = sorted(variants["prompt_id"].unique())
    flips = np.array(
        [
            (
                variants.filter(pl.col("prompt_id") == p)
                .select(pl.col("base_right") & ~pl.col("variant_right"))
                .to_series()
                .sum()
            )
            for p in prompts
        ],
        dtype=float,
    )
    judged = np.array([variants.filter(pl.col("prompt_id") == p).height for p in prompts], float)
    rng = np.random.default_rng(stable_seed("m", "d1", FLIP_SEED, ALL_FAMILIES))
    picks = rng.integers(0, len(prompts), size=(300, len(prompts)))
    rates = np.array([flips[p].sum() / judged[p].sum() for p in picks])
    low, high = np.percentile(rates, [2.5, 97.5])
    for axis in AXES:  # the same interval on every axis row
        row = _row(tails, "d1", axis, ALL_FAMILIES)
        assert row["ci_low_flip_right_to_wrong"] == pytest.approx(low)
        assert row["ci_high_flip_right_to_wrong"] == pytest.approx(high)


def test_weighted_quantiles_equal_np_quantile_of_the_repeated_sample() -> None:
    rng = np.random.default_rng(3)
    values = np.sort(rng.exponential(0.1, size=41))
    weights = rng.integers(0, 3, size=(500, 41))
    weights[0] = 0  # a resample holding nothing
    got = weighted_quantiles(values, weights, (0.5, 0.9, 0.99))
    assert np.isnan(got[0]).all()
    want = np.array([np.quantile(np.repeat(values, w), [0.5, 0.9, 0.99]) for w in weights[1:]])
    np.testing.assert_allclose(got[1:], want, rtol=1e-12, atol=0)


def test_prompt_weights_count_each_stratums_draws() -> None:
    weights = prompt_weights([3, 2], seed=5, resamples=50)
    assert weights.shape == (50, 5)
    assert (weights[:, :3].sum(axis=1) == 3).all() and (weights[:, 3:].sum(axis=1) == 2).all()


def test_a_single_prompt_has_no_interval_and_an_unmeasured_axis_has_a_reason() -> None:
    raw = raw_run(prompts=1)
    deltas = raw["deltas"].with_columns(
        pl.when(pl.col("axis") == "act")
        .then(None)
        .otherwise(pl.col("delta_norm"))
        .alias("delta_norm"),
        pl.when(pl.col("axis") == "act")
        .then(pl.lit("no hidden states"))
        .otherwise(pl.col("missing_reason"))
        .alias("missing_reason"),
    )
    instances = build_instances(deltas, raw["generations"], raw["prompts"])
    tails = tail_statistics(instances, resamples=50)
    row = _row(tails, "d1", "bleu", ALL_FAMILIES)
    assert row["q50"] is not None and row["ci_low_q50"] is None
    assert row["ci_missing_reason"] == "; ".join(
        [str(interval_refusal(1, "quantile intervals")), str(interval_refusal(1, "flip intervals"))]
    )
    act = _row(tails, POOLED, "act", ALL_FAMILIES)
    assert act["n"] == 0 and act["q50"] is None and act["max"] is None
    assert act["share_over_0_05"] is None and act["missing_reason"] == "no hidden states"
    pooled = _row(tails, POOLED, "bleu", ALL_FAMILIES)
    assert pooled["ci_low_q50"] is None  # two prompts over two datasets: still too few


def test_intervals_count_prompts_with_a_value_not_prompts_in_the_subset() -> None:
    """Five prompts in the subset, one variant each; on bleu only one prompt is measured.
    The old rule counted the five prompts and drew [x, x] from the one value; now the
    interval is missing with the count of measured prompts in its reason. Axes measured on
    every prompt keep their intervals."""
    raw = raw_run(prompts=MIN_PROMPTS, per_family=1)
    deltas = (
        raw["deltas"]
        .filter((pl.col("dataset") == "d1") & (pl.col("family") == "noise"))
        .with_columns(
            pl.when((pl.col("axis") == "bleu") & (pl.col("prompt_id") != "p0"))
            .then(None)
            .otherwise(pl.col("delta_norm").fill_null(0.05))
            .alias("delta_norm"),
            pl.when((pl.col("axis") == "bleu") & (pl.col("prompt_id") != "p0"))
            .then(pl.lit("gone"))
            .otherwise(None)
            .alias("missing_reason"),
        )
    )
    instances = build_instances(deltas, raw["generations"], raw["prompts"])
    tails = tail_statistics(instances, resamples=50)
    bleu = _row(tails, "d1", "bleu", "noise")
    assert bleu["n"] == 1 and bleu["n_prompts"] == MIN_PROMPTS and bleu["q50"] is not None
    assert bleu["ci_low_q50"] is None and bleu["ci_high_q99"] is None
    assert interval_refusal(1, "quantile intervals") in bleu["ci_missing_reason"]
    prob = _row(tails, "d1", "prob", "noise")
    assert prob["ci_low_q50"] is not None and prob["ci_high_q50"] is not None
    assert prob["ci_missing_reason"] is None or "quantile" not in prob["ci_missing_reason"]


def test_the_report_shows_the_pooled_tails_beside_sgs(run) -> None:
    from sago_core.report.sections.insights import tails_section
    from sago_core.scoring.prompt_scores import score_prompts
    from sago_core.scoring.summary import summarize

    raw, tails = run
    summary = summarize(score_prompts(raw["deltas"]))
    page = tails_section(tails, summary)
    row = _row(tails, POOLED, "prob", ALL_FAMILIES)
    sgs = summary.filter((pl.col("dataset") == POOLED) & (pl.col("axis") == "prob"))["sgs"][0]
    cells = re.search(r'<td class="l">prob</td>(.*?)</tr>', page)
    assert cells is not None
    values = re.findall(r"<td>([^<]*)</td>", cells.group(1))
    assert values[0] == f"{sgs:.4f}" and values[1] == str(row["n"])
    assert values[2] == f"{row['q50']:.4f} [{row['ci_low_q50']:.4f}, {row['ci_high_q50']:.4f}]"
    assert values[5] == f"{row['max']:.4f}"


def _instances(prompts_per_dataset: list[int], variants: int = 3) -> pl.DataFrame:
    """instances.parquet rows by hand: one model and family, a measured delta on every
    axis, no verdicts."""
    rng = np.random.default_rng(13)
    rows = []
    for d, prompts in enumerate(prompts_per_dataset):
        for p in range(prompts):
            for v in range(variants):
                row = {
                    "model": "m",
                    "dataset": f"d{d}",
                    "prompt_id": f"p{p}",
                    "variant_id": f"noise:{v}",
                    "family": "noise",
                    "base_correct": None,
                    "variant_correct": None,
                }
                for axis in AXES:
                    row[f"d_{axis}"] = float(rng.normal(0, 0.1))
                    row[f"reason_{axis}"] = None
                rows.append(row)
    schema = {"base_correct": pl.Boolean, "variant_correct": pl.Boolean}
    schema |= {f"reason_{axis}": pl.String for axis in AXES}
    return pl.DataFrame(rows, schema_overrides=schema)


def test_a_pooled_row_draws_its_prompts_together() -> None:
    """Five datasets of one prompt: a bootstrap within each dataset redrew each prompt whole,
    so the pooled band was [q, q] (then, a refusal). The pooled quantile is over all its
    variants together, so its five prompts are drawn together: a band with spread, equal to
    a plain loop over the five prompts."""
    tails = tail_statistics(_instances([1] * 5), resamples=50)
    pooled = _row(tails, POOLED, "bleu", ALL_FAMILIES)
    assert pooled["n"] == 15 and pooled["ci_missing_reason"] is None
    assert pooled["ci_low_q50"] < pooled["q50"] < pooled["ci_high_q50"]
    frame = _instances([1] * 5).sort("dataset", "prompt_id")
    prompts = [
        np.abs(frame.filter(pl.col("dataset") == d)["d_bleu"].to_numpy())
        for d in sorted(frame["dataset"].unique())
    ]
    draws = _loop_bootstrap([prompts], stable_seed("m", POOLED, "bleu", ALL_FAMILIES), 50)
    low, high = np.percentile(draws, [2.5, 97.5], axis=0)
    assert pooled["ci_low_q50"] == pytest.approx(low[0], rel=1e-9)
    assert pooled["ci_high_q99"] == pytest.approx(high[2], rel=1e-9)
