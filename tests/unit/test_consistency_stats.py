"""Spline-adjusted partial correlation, block-permutation p, corrections and detectable |r|,
each against an independent computation (a cardinal natural-spline basis from scipy's
CubicSpline, brute-force block orderings) or hand values, on synthetic checkpoints with a
known answer."""

from __future__ import annotations

import math
from itertools import permutations

import numpy as np
import polars as pl
import pytest
from scipy import interpolate, stats

from sago_core.statistics.partial_correlation import (
    block_permutation_p,
    critical_r,
    detectable_r,
    partial_correlation,
)
from sago_core.study.matrix import (
    method_disagreements,
    partial_correlation_table,
    sign_agreement,
)


def _natural_cardinal_basis(z: np.ndarray, knots: np.ndarray) -> np.ndarray:
    """Independent basis of the natural cubic splines on ``knots``: the natural interpolating
    spline of each unit vector, continued linearly beyond the outer knots."""
    columns = []
    for j in range(len(knots)):
        values = np.zeros(len(knots))
        values[j] = 1.0
        spline = interpolate.CubicSpline(knots, values, bc_type="natural")
        column = spline(z)
        for edge, side in ((knots[0], z < knots[0]), (knots[-1], z > knots[-1])):
            column[side] = spline(edge) + spline(edge, 1) * (z[side] - edge)
        columns.append(column)
    return np.column_stack(columns)


def _independent_partial(x, y, design):
    rx = x - design @ np.linalg.pinv(design) @ x
    ry = y - design @ np.linalg.pinv(design) @ y
    r = float(np.corrcoef(rx, ry)[0, 1])
    df = len(x) - design.shape[1] - 1
    p = float(2 * stats.t.sf(abs(r) * math.sqrt(df / (1 - r * r)), df))
    return r, p, rx, ry


def _saturating(z: np.ndarray) -> np.ndarray:
    """A natural cubic spline on the data's 10/50/90% quantiles: rises, then flattens."""
    knots = np.quantile(z, [0.1, 0.5, 0.9])
    return _natural_cardinal_basis(z, knots) @ np.array([0.0, 0.8, 1.0])


def test_spline_partial_correlation_matches_an_independent_spline_basis() -> None:
    rng = np.random.default_rng(4)
    z = np.sort(rng.uniform(0, 1, 15))
    x = np.log1p(5 * z) + 0.05 * rng.normal(size=15)
    y = np.log1p(5 * z) + 0.05 * rng.normal(size=15) + 0.5 * (x - np.log1p(5 * z))
    got = partial_correlation(x, y, z, method="spline", knots=3)
    design = _natural_cardinal_basis(z, np.quantile(z, [0.1, 0.5, 0.9]))
    r, p, *_ = _independent_partial(x, y, design)
    assert got.df == 15 - 4  # three spline columns, one correlation
    assert got.r == pytest.approx(r, abs=1e-9) and got.p_value == pytest.approx(p, rel=1e-7)
    linear = partial_correlation(x, y, z, method="linear")
    r_lin, p_lin, *_ = _independent_partial(x, y, np.column_stack([np.ones(15), z]))
    assert linear.df == 12 and linear.r == pytest.approx(r_lin, abs=1e-9)
    assert linear.p_value == pytest.approx(p_lin, rel=1e-7)


def test_a_curved_id_relation_fools_the_linear_adjustment_but_not_the_spline() -> None:
    rng = np.random.default_rng(7)
    n = 40
    z = np.sort(rng.uniform(0, 1, n))
    # Both OOD scores follow ID along the same saturating curve; their noise is independent,
    # so the true partial correlation given ID is 0.
    x = _saturating(z) + 0.02 * rng.normal(size=n)
    y = _saturating(z) + 0.02 * rng.normal(size=n)
    linear = partial_correlation(x, y, z, method="linear")
    spline = partial_correlation(x, y, z, method="spline", knots=3)
    assert linear.r is not None and linear.r > 0.8 and linear.p_value < 1e-6  # spurious
    assert spline.r is not None and abs(spline.r) < 0.3 and spline.p_value > 0.05
    design = _natural_cardinal_basis(z, np.quantile(z, [0.1, 0.5, 0.9]))
    assert spline.r == pytest.approx(_independent_partial(x, y, design)[0], abs=1e-9)
    # Knots by the rule at 40 checkpoints: 7, at Harrell's quantiles for 7 knots.
    auto = partial_correlation(x, y, z, method="spline")
    seven = [0.025, 0.1833, 0.3417, 0.5, 0.6583, 0.8167, 0.975]
    r7, p7, *_ = _independent_partial(x, y, _natural_cardinal_basis(z, np.quantile(z, seven)))
    assert auto.df == 40 - 7 - 1 and auto.r == pytest.approx(r7, abs=1e-9)
    assert auto.p_value == pytest.approx(p7, rel=1e-7) and auto.p_value > 0.05


def _brute_force_block_p(rx: np.ndarray, ry: np.ndarray, length: int) -> float:
    blocks = [list(range(i, min(i + length, len(rx)))) for i in range(0, len(rx), length)]
    observed = abs(np.corrcoef(rx, ry)[0, 1])
    hits = total = 0
    for order in permutations(blocks):
        index = [i for block in order for i in block]
        hits += abs(np.corrcoef(rx, ry[index])[0, 1]) >= observed - 1e-12
        total += 1
    return hits / total


@pytest.mark.parametrize(("method", "n", "length"), [("linear", 10, 2), ("spline", 9, 2)])
def test_block_permutation_p_equals_brute_force_over_block_orderings(
    method: str, n: int, length: int
) -> None:
    rng = np.random.default_rng(n)
    z = np.linspace(0, 1, n) + 0.01 * rng.normal(size=n)
    shared = rng.normal(size=n)
    x, y = z + shared + rng.normal(size=n), z**2 + shared + rng.normal(size=n)
    got = partial_correlation(x, y, z, method=method)  # type: ignore[arg-type]
    perm = block_permutation_p(got.rx, got.ry, block_length=length)  # type: ignore[arg-type]
    design = (
        np.column_stack([np.ones(n), z])
        if method == "linear"
        else _natural_cardinal_basis(z, np.quantile(z, [0.1, 0.5, 0.9]))
    )
    _, _, rx, ry = _independent_partial(x, y, design)
    assert perm.exact and perm.orderings == 120  # 5 blocks
    assert perm.p_value == pytest.approx(_brute_force_block_p(rx, ry, length))


def test_identical_residuals_reach_exactly_the_smallest_attainable_p() -> None:
    rng = np.random.default_rng(1)
    residuals = rng.normal(size=8)
    perm = block_permutation_p(residuals, residuals.copy(), block_length=2)
    assert perm.p_value == pytest.approx(1 / 24)  # only the identity of 4! orderings


def test_too_few_checkpoints_give_na_with_the_reason() -> None:
    rng = np.random.default_rng(2)
    perm = block_permutation_p(rng.normal(size=6), rng.normal(size=6), block_length=2)
    assert perm.p_value is None and "at least 7 checkpoints" in (perm.reason or "")
    spline = partial_correlation([1, 2, 4, 3.0], [2, 1, 3, 5.0], [1, 2, 3, 4.0], "spline")
    assert spline.r is None and "needs at least 5" in (spline.reason or "")
    assert partial_correlation([1, 2, 4, 3.0], [2, 1, 3, 5.0], [1, 2, 3, 4.0]).r is not None


def test_critical_and_detectable_r_match_hand_values() -> None:
    # Tables of critical r (two-sided, alpha 0.05): df 5 -> 0.754, df 10 -> 0.576.
    assert critical_r(5) == pytest.approx(0.754, abs=5e-4)
    assert critical_r(10) == pytest.approx(0.576, abs=5e-4)
    # Fisher z: tanh((1.95996 + 0.84162) / sqrt(10 - 1 - 3)) = tanh(1.14375) = 0.8155
    assert detectable_r(10, 1) == pytest.approx(0.8155, abs=5e-4)
    assert detectable_r(4, 1) is None and critical_r(0) is None


def _long(family: str, columns: dict[str, np.ndarray], metric: str = "ref_loglik") -> list:
    return [
        {"series": family, "position": i, "dataset": d, "metric": metric, "value": float(v)}
        for d, values in columns.items()
        for i, v in enumerate(values)
    ]


def test_the_table_corrects_the_permutation_p_over_one_family_metric_and_method() -> None:
    rng = np.random.default_rng(9)
    n = 12
    ident = np.linspace(0, 1, n)
    shared = rng.normal(size=n)
    columns = {
        "id": ident,
        "a": ident + shared + 0.2 * rng.normal(size=n),
        "b": ident + shared + 0.2 * rng.normal(size=n),
        "c": ident + rng.normal(size=n),
    }
    table = partial_correlation_table(pl.DataFrame(_long("ft", columns)), "id", ["a", "b", "c"])
    assert set(table["method"]) == {"linear", "spline"} and table.height == 6
    for method in ("linear", "spline"):
        group = table.filter(pl.col("method") == method).sort("p_perm")
        p = group["p_perm"].to_list()
        # Holm by hand for m = 3: 3 p1, max(3 p1, 2 p2), max(., p3), capped at 1
        holm = [min(1, 3 * p[0]), min(1, max(3 * p[0], 2 * p[1]))]
        holm.append(min(1, max(holm[1], p[2])))
        # BH by hand: p3, min(1.5 p2, p3), min(3 p1, 1.5 p2, p3)
        bh3 = min(1, p[2])
        bh2 = min(1.5 * p[1], bh3)
        bh = [min(3 * p[0], bh2), bh2, bh3]
        assert len(set(p)) == 3  # distinct p-values: the step-down/step-up order matters
        assert group["p_holm"].to_list() == pytest.approx(holm)
        assert group["p_bh"].to_list() == pytest.approx(bh)
        assert group["significant"].to_list() == [h <= 0.05 for h in holm]
        # spline knots by the rule at 12 checkpoints: 12 // 2 - 1 = 5, so 12 - 5 - 1 df
        assert (group["df"] == (12 - 3 if method == "linear" else 12 - 5 - 1)).all()
    ab = table.filter((pl.col("ood_a") == "a") & (pl.col("ood_b") == "b"))
    assert (ab["r"] > 0.7).all() and (ab["p_perm"] < 0.01).all()


def _cell(family: str, pair: str, r: float, significant: bool, method: str = "linear") -> dict:
    return {
        "series": family,
        "metric": "m",
        "method": method,
        "ood_a": pair,
        "ood_b": "z",
        "r": r,
        "significant": significant,
    }


def test_sign_agreement_counts_significant_pairs_separately() -> None:
    table = pl.DataFrame(
        [
            _cell("one", "a", 0.9, True),
            _cell("two", "a", 0.8, True),  # agree, both significant
            _cell("one", "b", 0.5, False),
            _cell("two", "b", -0.4, False),  # disagree, neither significant
            _cell("one", "c", -0.9, True),
            _cell("two", "c", 0.2, False),  # disagree, one significant
            _cell("one", "d", 0.7, True),
            _cell("two", "d", 0.6, True),  # agree, both significant
        ]
    )
    row = sign_agreement(table).row(0, named=True)
    assert (row["dataset_pairs"], row["agreeing"], row["share"]) == (4, 2, 0.5)
    assert (row["significant_pairs"], row["significant_agreeing"]) == (2, 2)
    assert row["significant_share"] == 1.0 and row["method"] == "linear"


def test_method_disagreements_list_sign_and_significance_changes() -> None:
    table = pl.DataFrame(
        [
            _cell("f", "a", 0.9, True),
            _cell("f", "a", 0.1, False, "spline"),  # significance differs
            _cell("f", "b", 0.3, False),
            _cell("f", "b", -0.2, False, "spline"),  # sign differs
            _cell("f", "c", 0.5, False),
            _cell("f", "c", 0.4, False, "spline"),  # agree
        ]
    )
    gaps = method_disagreements(table)
    assert gaps["ood_a"].to_list() == ["a", "b"]
    assert gaps["significance_differs"].to_list() == [True, False]
    assert gaps["sign_differs"].to_list() == [False, True]


def test_the_closing_note_table_has_one_line_per_family_and_pair() -> None:
    from sago_core.study.summary import pair_markdown

    rng = np.random.default_rng(0)
    columns = {d: rng.normal(size=7) for d in ("id", "a", "b", "c")}
    rows = _long("ft", columns) + _long("q", {d: v[::-1] for d, v in columns.items()})
    table = partial_correlation_table(pl.DataFrame(rows), "id", ["a", "b", "c"])
    lines = pair_markdown(table, "ref_loglik").strip().splitlines()
    assert len(lines) == 2 + 2 * 3  # header, rule, families x pairs
    ft_ab = table.filter(
        (pl.col("series") == "ft") & (pl.col("ood_a") == "a") & (pl.col("ood_b") == "b")
    )
    r_linear, r_spline = (ft_ab.filter(pl.col("method") == m)["r"][0] for m in ("linear", "spline"))
    assert lines[2].startswith("| ft | a | b | 7 |")
    assert f"{r_linear:.3f}" in lines[2] and f"{r_spline:.3f}" in lines[2]
