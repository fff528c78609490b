"""Consistency study: partial-correlation table against an independent formula on synthetic
checkpoints with a known answer, NA reasons, sign agreement, config validation."""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import polars as pl
import pytest

from sago_core.errors import ConfigError
from sago_core.study.config import build_study_config
from sago_core.study.matrix import partial_correlation_table, sign_agreement
from sago_core.study.scores import current_columns


def _first_order_partial(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> float:
    """The textbook recursion from pairwise Pearson correlations (independent of lstsq)."""
    rxy, rxz, ryz = (np.corrcoef(a, b)[0, 1] for a, b in ((x, y), (x, z), (y, z)))
    return float((rxy - rxz * ryz) / math.sqrt((1 - rxz**2) * (1 - ryz**2)))


def _scores(family: str, columns: dict[str, np.ndarray], metric: str = "accuracy") -> pl.DataFrame:
    rows = []
    for dataset, values in columns.items():
        for position, value in enumerate(values):
            rows.append(
                {
                    "series": family,
                    "position": position,
                    "model": f"{family}-{position}",
                    "dataset": dataset,
                    "metric": metric,
                    "value": None if np.isnan(value) else float(value),
                }
            )
    return pl.DataFrame(rows)


def test_partial_correlations_have_the_known_answer_and_match_the_recursion() -> None:
    rng = np.random.default_rng(11)
    n = 400
    ident = rng.normal(size=n)  # in-distribution skill drives every OOD score
    shared = rng.normal(size=n)  # a and b also share something beyond ID; c does not
    a = ident + shared + 0.5 * rng.normal(size=n)
    b = ident + shared + 0.5 * rng.normal(size=n)
    c = ident + rng.normal(size=n)
    table = partial_correlation_table(
        _scores("fam", {"id": ident, "a": a, "b": b, "c": c}), "id", ["a", "b", "c"]
    )
    linear = table.filter(pl.col("method") == "linear")
    got = {(r["ood_a"], r["ood_b"]): r for r in linear.iter_rows(named=True)}
    assert set(got) == {("a", "b"), ("a", "c"), ("b", "c")}
    assert got[("a", "b")]["r"] == pytest.approx(_first_order_partial(a, b, ident), abs=1e-10)
    assert got[("a", "b")]["r"] == pytest.approx(1 / 1.25, abs=0.05)  # known: 1 / (1 + 0.25)
    assert abs(got[("a", "c")]["r"]) < 0.12 and got[("a", "c")]["p_value"] > 0.01
    assert got[("a", "b")]["p_value"] < 1e-30 and got[("a", "b")]["n"] == n


def test_missing_checkpoints_are_dropped_and_undefined_r_says_why() -> None:
    ident = np.array([0.1, 0.2, 0.3, 0.4, 0.5])
    a = np.array([0.2, 0.1, 0.5, 0.3, np.nan])
    b = np.array([0.3, 0.3, 0.3, 0.3, 0.3])  # constant
    c = np.array([0.5, 0.1, 0.2, 0.9, 0.4])
    table = partial_correlation_table(
        _scores("fam", {"id": ident, "a": a, "b": b, "c": c}), "id", ["a", "b", "c"]
    )
    linear = table.filter(pl.col("method") == "linear")
    got = {(r["ood_a"], r["ood_b"]): r for r in linear.iter_rows(named=True)}
    assert (
        got[("a", "b")]["r"] is None
        and "same for every checkpoint" in got[("a", "b")]["missing_reason"]
    )
    assert got[("a", "c")]["n"] == 4 and got[("a", "c")]["r"] is not None
    assert got[("a", "c")]["r"] == pytest.approx(_first_order_partial(a[:4], c[:4], ident[:4]))
    short = partial_correlation_table(
        _scores("fam", {"id": ident[:3], "a": a[:3], "c": c[:3]}), "id", ["a", "c"]
    )
    assert short["r"][0] is None and "at least 4" in short["missing_reason"][0]
    spline = table.filter(
        (pl.col("method") == "spline") & (pl.col("ood_a") == "a") & (pl.col("ood_b") == "c")
    ).row(0, named=True)
    assert spline["r"] is None  # 4 checkpoints: the spline needs 5
    assert "spline adjustment needs at least 5" in spline["missing_reason"]


def test_sign_agreement_counts_matching_signs() -> None:
    rng = np.random.default_rng(5)
    ident = rng.normal(size=30)
    shared = rng.normal(size=30)
    one = {"id": ident, "a": ident + shared, "b": ident + shared, "c": ident - shared}
    two = {k: v + 0.05 * rng.normal(size=30) for k, v in one.items()}
    scores = pl.concat([_scores("one", one), _scores("two", two)])
    table = partial_correlation_table(scores, "id", ["a", "b", "c"])
    for agreement in sign_agreement(table).iter_rows(named=True):  # linear, then spline
        assert agreement["dataset_pairs"] == 3 and agreement["agreeing"] == 3
        assert agreement["share"] == 1.0


def test_study_config_needs_four_checkpoints_and_distinct_datasets() -> None:
    good = {
        "series": {"ft": ["hf:a", "hf:b", "hf:c", "hf:d"]},
        "in_distribution": "x",
        "out_of_distribution": ["y", "z"],
        "evaluation": {"preset": "demo", "n": 2},
    }
    study = build_study_config(good, source="study.yaml")
    assert study.evaluation.models == ("hf:a", "hf:b", "hf:c", "hf:d")
    assert [c[1] for c in study.checkpoints()] == [0, 1, 2, 3]
    with pytest.raises(ConfigError, match=r"study\.yaml.*at least 4"):
        build_study_config(
            {**good, "series": {"ft": ["hf:a", "hf:b", "hf:c"]}}, source="study.yaml"
        )
    with pytest.raises(ConfigError, match="both in- and out-of-distribution"):
        build_study_config({**good, "out_of_distribution": ["x", "y"]}, source="s")
    with pytest.raises(ConfigError, match=r"evaluation.*n"):
        build_study_config({**good, "evaluation": {"n": 0}}, source="s")


def test_a_study_file_in_the_old_key_names_reads_as_today_and_keeps_its_folder(
    capsys: pytest.CaptureFixture[str],
) -> None:
    made = {"folder": "unused", "finetune_steps": [0, 1, 2, 3], "quantize_bits": [32, 8, 6, 4]}
    rest = {"in_distribution": "x", "out_of_distribution": ["y", "z"], "evaluation": {"n": 2}}
    mine = {"mine": ["hf:a", "hf:b", "hf:c", "hf:d"]}
    old = build_study_config({"families": mine, "series": made, **rest}, source="s")
    assert capsys.readouterr().err.splitlines() == [
        "note: the study key series (the series to build) is now make_series",
        "note: the study key families is now series",
    ]
    new = build_study_config({"series": mine, "make_series": made, **rest}, source="s")
    assert old == new and list(new.series) == ["mine", "finetune", "quantize"]
    assert capsys.readouterr().err == ""
    # the folder name hashes the keys' first names, as before the rename
    payload = new.model_dump(mode="json", exclude={"run_id", "series", "make_series"})
    payload |= {
        "evaluation": new.evaluation.result_hash(),
        "families": new.model_dump(mode="json")["series"],
        "series": new.model_dump(mode="json")["make_series"],
    }
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
    assert new.run_dir().name == f"consistency-{digest[:12]}"
    with pytest.raises(ConfigError, match="give only series"):
        build_study_config({"families": mine, "series": mine, **rest}, source="s")


def test_a_saved_sign_agreement_with_the_old_column_names_reads_as_today() -> None:
    old = pl.DataFrame({"family_a": ["ft"], "family_b": ["q"], "pairs_compared": [3]})
    assert current_columns(old).columns == ["series_a", "series_b", "dataset_pairs"]


def test_a_gap_inside_the_series_leaves_the_permutation_test_out_with_its_reason() -> None:
    rng = np.random.default_rng(5)
    ident = np.linspace(0.1, 0.9, 10)
    a, b = ident + rng.normal(0, 0.1, 10), ident + rng.normal(0, 0.1, 10)
    gap, end = a.copy(), a.copy()
    gap[4] = np.nan  # checkpoint 4 unscored: 3 and 5 would share a block
    end[9] = np.nan  # the last one unscored: the rest are still neighbours
    for values, contiguous in ((gap, False), (end, True)):
        table = partial_correlation_table(
            _scores("f", {"id": ident, "a": values, "b": b}), "id", ["a", "b"]
        )
        row = table.filter(pl.col("method") == "linear").row(0, named=True)
        assert row["n"] == 9 and row["r"] is not None
        if contiguous:
            assert row["p_perm"] is not None
        else:
            assert row["p_perm"] is None and "not be neighbours" in row["perm_reason"]
