"""axis_structure.parquet and axis_pca.parquet against scipy/numpy on hand-built scores."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import polars as pl
import pytest
from scipy import stats

from sago_core.statistics.axis_structure import (
    REDUNDANT_RHO,
    pca_table,
    redundancy_note,
    spearman_table,
)
from sago_core.vocabulary import AXES


def _scores(columns: dict[str, np.ndarray], model: str = "m") -> pl.DataFrame:
    n = len(next(iter(columns.values())))
    rows = []
    for axis, values in columns.items():
        for i in range(n):
            value = values[i]
            rows.append(
                {
                    "model": model,
                    "dataset": f"d{i % 3}",  # pooled over three datasets
                    "prompt_id": f"p{i // 3}",
                    "axis": axis,
                    "s": None if np.isnan(value) else float(value),
                    "n_variants": 4,
                    "missing_reason": "gone" if np.isnan(value) else None,
                }
            )
    return pl.DataFrame(rows, schema_overrides={"s": pl.Float64, "missing_reason": pl.String})


@pytest.fixture(scope="module")
def columns() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(11)
    base = rng.random(30)
    return {
        "act": rng.random(30),
        "bleu": base,
        "bert": base * 0.5 + rng.normal(0, 0.01, 30),  # moves with bleu
        "prob": rng.random(30),
        "ent": np.where(np.arange(30) < 3, np.nan, rng.random(30)),  # three prompts unscored
        "mr": np.zeros(30),  # constant: rank correlation undefined
    }


def test_spearman_matches_scipy_pooled_over_datasets(columns) -> None:
    table = spearman_table(_scores(columns))
    assert table.columns[:5] == ["model", "axis_a", "axis_b", "spearman_rho", "p_value"]
    assert table.height == len(list(combinations(AXES, 2)))
    for a, b in combinations(AXES, 2):
        row = table.filter((pl.col("axis_a") == a) & (pl.col("axis_b") == b)).row(0, named=True)
        have = ~np.isnan(columns[a]) & ~np.isnan(columns[b])
        if "mr" in (a, b):
            assert row["spearman_rho"] is None and row["p_value"] is None
            assert row["missing_reason"] == "mr is constant over these prompts"
            assert row["redundant"] is None
            continue
        want = stats.spearmanr(columns[a][have], columns[b][have])
        assert row["n"] == have.sum()
        assert row["spearman_rho"] == pytest.approx(want.statistic, rel=1e-12)
        assert row["p_value"] == pytest.approx(want.pvalue, rel=1e-9)
        assert row["redundant"] == (abs(want.statistic) > REDUNDANT_RHO and want.pvalue < 0.05)
    pairs, own = redundancy_note(table, "m")
    assert pairs == [("bleu", "bert")]
    assert own == ["act", "prob", "ent"]


def test_pca_matches_numpy_eigen_decomposition_of_the_correlation_matrix(columns) -> None:
    pca = pca_table(_scores(columns))
    scored = pca.drop_nulls("pca_component")
    kept = ["act", "bleu", "bert", "prob", "ent"]
    assert sorted(set(scored["axis"])) == sorted(kept)
    dropped = pca.filter(pl.col("pca_component").is_null())
    assert dropped["axis"].to_list() == ["mr"] and "constant" in dropped["missing_reason"][0]
    complete = np.column_stack([columns[a] for a in kept])
    complete = complete[~np.isnan(complete).any(axis=1)]
    values, vectors = np.linalg.eigh(np.corrcoef(complete, rowvar=False))
    order = np.argsort(values)[::-1]
    values, vectors = values[order], vectors[:, order]
    shares = (
        scored.group_by("pca_component")
        .agg(pl.col("pca_variance_explained").first())
        .sort("pca_component")
    )
    np.testing.assert_allclose(shares["pca_variance_explained"], values / values.sum(), rtol=1e-10)
    assert shares["pca_variance_explained"].sum() == pytest.approx(1.0)
    assert (scored["n"] == 27).all()
    for component in range(len(kept)):
        got = scored.filter(pl.col("pca_component") == component + 1)
        loadings = np.array([got.filter(pl.col("axis") == a)["pca_loading"][0] for a in kept])
        want = vectors[:, component]
        # eigenvectors are defined up to sign: compare the sign-free part, then the rule
        np.testing.assert_allclose(np.abs(loadings), np.abs(want), atol=1e-9)
        assert loadings[np.argmax(np.abs(loadings))] > 0
    first = scored.filter(pl.col("pca_component") == 1)
    heavy = first.sort(pl.col("pca_loading").abs(), descending=True)["axis"].head(2)
    assert set(heavy) == {"bleu", "bert"}  # the redundant pair dominates component 1


def test_too_few_prompts_give_reasons_not_numbers() -> None:
    tiny = {axis: np.array([0.1, 0.2]) for axis in AXES}
    table = spearman_table(_scores(tiny))
    assert table["spearman_rho"].null_count() == table.height
    assert (table["missing_reason"] == "fewer than 3 prompts with both scores").all()
    pca = pca_table(_scores(tiny))
    assert pca["pca_variance_explained"].null_count() == pca.height
    assert pca["missing_reason"].null_count() == 0


def test_the_report_note_names_the_redundant_pair_and_the_independent_axes(columns) -> None:
    from sago_core.report.sections.insights import structure_section

    scores = _scores(columns)
    page = structure_section(spearman_table(scores), pca_table(scores))
    note = page[page.index("Redundant on this run") :].split("</p>")[0]
    assert note == ("Redundant on this run: bleu–bert. Carrying their own signal: act, prob, ent.")
    assert "mr: constant over the prompts: no variance to explain." in page
    assert page.count('<tr><td class="l">PC') == 5
