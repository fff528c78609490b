"""Per-layer profiles: means, bands and onset layers against independent computations."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from sago_core.statistics.layer_profiles import (
    NO_INTERVAL,
    NO_ONSET,
    ONSET_FRACTION,
    layer_profiles,
    onset_layer,
    profile_band,
    run_layer_profiles,
)
from sago_core.vocabulary import POOLED


def _rows(cosines: dict[tuple[str, str, float], list[list[float]]]) -> pl.DataFrame:
    records = []
    for (family, subtype, strength), curves in cosines.items():
        for i, curve in enumerate(curves):
            records.append(
                {
                    "model": "m",
                    "dataset": "d",
                    "prompt_id": f"p{i}",
                    "variant_id": f"{family}:{subtype}:{strength}:{i}",
                    "family": family,
                    "subtype": subtype,
                    "strength": strength,
                    "layer_cosines": curve,
                    "layer_cosines_user": [c - 0.01 for c in curve],
                }
            )
    return pl.DataFrame(records)


def test_onset_is_the_first_layer_at_half_the_maximum() -> None:
    assert ONSET_FRACTION == 0.5
    assert onset_layer(np.array([0.0, 0.1, 0.19, 0.2, 0.4, 0.3])) == 4  # 0.2 >= 0.5 * 0.4
    assert onset_layer(np.array([0.5, 0.1, 0.9])) == 1
    assert onset_layer(np.array([0.0, 0.0, 0.0])) is None
    assert onset_layer(np.array([0.0, 0.0, 0.3]), fraction=0.9) == 3


def test_profile_means_match_numpy_at_both_positions() -> None:
    rng = np.random.default_rng(3)
    reg = (1 - rng.uniform(0, 0.2, size=(7, 4))).tolist()
    noise = (1 - rng.uniform(0, 0.05, size=(5, 4))).tolist()
    rows = _rows({("register", "polite", 2.0): reg, ("noise", "spacing", 5.0): noise})
    out = layer_profiles(rows, seed=0)
    got = out.filter(
        (pl.col("family") == "register")
        & (pl.col("subtype") == "polite")
        & (pl.col("read_position") == "generation_start")
    ).sort("layer")
    np.testing.assert_allclose(got["mean_one_minus_cos"], 1 - np.array(reg).mean(axis=0))
    assert got["layer"].to_list() == [1, 2, 3, 4]
    assert set(got["n"]) == {7}
    user = out.filter(
        (pl.col("family") == "noise")
        & (pl.col("subtype") == "spacing")
        & (pl.col("read_position") == "prompt_end")
    ).sort("layer")
    np.testing.assert_allclose(user["mean_one_minus_cos"], 1.01 - np.array(noise).mean(axis=0))
    expected_onset = onset_layer(1 - np.array(reg).mean(axis=0))
    assert set(got["onset_layer"]) == {expected_onset}


def test_pooled_family_profile_averages_all_its_variants() -> None:
    a = [[0.9, 0.8], [0.7, 0.6]]
    b = [[1.0, 0.5]]
    rows = _rows({("noise", "spacing", 5.0): a, ("noise", "punctuation", 3.0): b})
    pooled = layer_profiles(rows, seed=0).filter(
        (pl.col("subtype") == POOLED) & (pl.col("read_position") == "generation_start")
    )
    assert pooled["strength"].null_count() == pooled.height
    np.testing.assert_allclose(
        pooled.sort("layer")["mean_one_minus_cos"], [(0.1 + 0.3 + 0.0) / 3, (0.2 + 0.4 + 0.5) / 3]
    )
    assert set(pooled["n"]) == {3}


def test_bootstrap_band_matches_the_normal_approximation() -> None:
    rng = np.random.default_rng(11)
    values = rng.normal(0.1, 0.02, size=(400, 3))
    mean, low, high = profile_band(values, seed=5, resamples=4000)
    assert low is not None and high is not None
    half = 1.959964 * values.std(axis=0, ddof=1) / np.sqrt(len(values))
    np.testing.assert_allclose(mean, values.mean(axis=0))
    np.testing.assert_allclose(high - low, 2 * half, rtol=0.1)
    np.testing.assert_allclose((high + low) / 2, mean, atol=0.2 * half.max())


def test_band_of_identical_variants_is_the_value_and_one_variant_has_none() -> None:
    _, low, high = profile_band(np.full((6, 2), 0.25), seed=0)
    assert low is not None and high is not None
    np.testing.assert_allclose(low, [0.25, 0.25])
    np.testing.assert_allclose(high, [0.25, 0.25])
    rows = _rows({("register", "polite", 2.0): [[0.9, 0.8]]})
    one = layer_profiles(rows, seed=0)
    assert one["ci_low"].null_count() == one.height
    assert set(one["missing_reason"]) == {NO_INTERVAL}


def test_zero_profile_has_no_onset_and_says_why() -> None:
    rows = _rows({("replay", "base", 0.0): [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]})
    out = layer_profiles(rows, seed=0).filter(pl.col("read_position") == "generation_start")
    assert out["onset_layer"].null_count() == out.height
    assert set(out["missing_reason"]) == {NO_ONSET}


def test_non_finite_and_missing_curves_are_left_out_and_bands_are_seeded() -> None:
    rows = _rows({("register", "polite", 2.0): [[0.9, 0.8], [0.7, float("nan")], [0.5, 0.4]]})
    rows = pl.concat(
        [
            rows,
            rows.head(1).with_columns(
                pl.lit("p9").alias("prompt_id"),
                pl.lit(None, pl.List(pl.Float64)).alias("layer_cosines"),
            ),
        ]
    )
    out = layer_profiles(rows, seed=1).filter(
        (pl.col("read_position") == "generation_start") & (pl.col("subtype") == "polite")
    )
    assert set(out["n"]) == {2}
    np.testing.assert_allclose(out.sort("layer")["mean_one_minus_cos"], [0.3, 0.4])
    again = layer_profiles(rows.reverse(), seed=1).filter(
        (pl.col("read_position") == "generation_start") & (pl.col("subtype") == "polite")
    )
    assert out.sort("layer")["ci_low"].to_list() == again.sort("layer")["ci_low"].to_list()


def test_run_profiles_take_the_family_from_generations() -> None:
    analysis = pl.DataFrame(
        {
            "model": ["m", "m", "m"],
            "dataset": ["d"] * 3,
            "prompt_id": ["p0", "p0", "p1"],
            "variant_id": ["base", "v", "v"],
            "layer_cosines": [[1.0, 1.0], [0.9, 0.6], [0.7, 0.2]],
            "layer_cosines_user": [None, None, None],
        },
        schema_overrides={"layer_cosines_user": pl.List(pl.Float64)},
    )
    generations = analysis.select("model", "dataset", "prompt_id", "variant_id").with_columns(
        pl.lit("register").alias("family"),
        pl.lit("polite").alias("subtype"),
        pl.lit(2.0).alias("strength"),
    )
    out = run_layer_profiles(analysis, generations, seed=0)
    assert set(out["read_position"]) == {"generation_start"}  # no curve at the user's text
    row = out.filter((pl.col("subtype") == "polite") & (pl.col("layer") == 2))
    assert row["mean_one_minus_cos"].item() == pytest.approx((0.4 + 0.8) / 2)
    assert row["onset_layer"].item() == 2  # profile (0.2, 0.6): 0.2 < 0.5 * 0.6


def test_report_section_draws_three_figures_and_the_onset_table() -> None:
    from sago_core.report.locate import Located, locate_sections

    rng = np.random.default_rng(0)
    rows = _rows(
        {
            ("register", "polite", 2.0): (1 - rng.uniform(0, 0.2, (4, 5))).tolist(),
            ("noise", "spacing", 5.0): (1 - rng.uniform(0, 0.05, (4, 5))).tolist(),
        }
    )
    profiles = layer_profiles(rows, seed=0)
    patching = pl.DataFrame(
        {
            "model": ["m"] * 4,
            "dataset": ["d"] * 4,
            "prompt_id": ["p0", "p0", "p1", "p1"],
            "variant_id": ["a", "a", "a", "a"],
            "family": ["register"] * 4,
            "layer": [1, 2, 1, 2],
            "recovery": [0.1, 0.9, None, 0.7],
            "kl_first_token": [0.5, 0.0, 0.4, 0.0],
            "missing_reason": [None, None, "no change to restore", None],
        }
    )
    html = "".join(locate_sections(Located(profiles, patching)))
    for figure in ("layer-profiles", "layer-profiles-strength", "patching-recovery"):
        assert f'id="fig-{figure}"' in html
    assert "1 of 4 rows have no recovery" in html
    onset = profiles.filter(
        (pl.col("family") == "register")
        & (pl.col("subtype") == POOLED)
        & (pl.col("read_position") == "generation_start")
    )["onset_layer"][0]
    assert f"<td>{onset} / 5</td>" in html
    assert locate_sections(None) == []
