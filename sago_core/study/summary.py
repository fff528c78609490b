"""The study's headline tables as data: one row per OOD pair and series for one metric (r
linear and spline, t and permutation p, corrected p), and the minimum detectable |r| at the
study's size. The page (``report``) and the closing-note markdown both read these."""

from __future__ import annotations

from typing import Any

import polars as pl

from sago_core.statistics.partial_correlation import (
    ADJUSTMENTS,
    critical_r,
    design_columns,
    detectable_r,
    knots_for,
)
from sago_core.study.design import Test, reachability


def pair_rows(table: pl.DataFrame, metric: str) -> list[dict[str, Any]]:
    """Per (series, OOD pair): r, p, p_perm, p_holm, p_bh and significance for each method."""
    mine = table.filter(pl.col("metric") == metric)
    index = {
        (r["series"], r["ood_a"], r["ood_b"], r["method"]): r for r in mine.iter_rows(named=True)
    }
    keys = sorted({(f, a, b) for f, a, b, _ in index})
    rows = []
    for series, a, b in keys:
        row: dict[str, Any] = {"series": series, "ood_a": a, "ood_b": b}
        for method in ADJUSTMENTS:
            cell = index.get((series, a, b, method), {})
            for column in ("r", "p_value", "p_perm", "p_holm", "p_bh", "significant", "n"):
                row[f"{column}_{method}"] = cell.get(column)
            row[f"reason_{method}"] = cell.get("missing_reason") or cell.get("perm_reason")
        rows.append(row)
    return rows


def detectable_rows(
    table: pl.DataFrame,
    knots: int | None,
    alpha: float,
    corrected_test: Test = "permutation",
    block_length: int = 2,
    draws: int = 9999,
    power: float = 0.8,
) -> list[dict[str, Any]]:
    """Per series and method at the series' largest n: df, whether significance is
    reachable with the test Holm corrects (``sago_core.study.design``), the critical
    |r| *of that test* (uncorrected, and at Holm's first step alpha / pairs), and the |r|
    detected with ``power`` (Fisher z, the t-test's; approximate for the permutation test).

    The permutation test has no fixed critical |r| (its threshold depends on the residuals):
    its critical columns are None and ``note`` says what can be concluded instead. Where
    significance is unreachable nothing is detectable: detectable_r is None too."""
    rows = []
    for (series, method), frame in table.group_by(["series", "method"], maintain_order=True):
        n = int(frame["n"].max() or 0)  # type: ignore[arg-type]
        pairs = frame.select("ood_a", "ood_b").unique().height
        k = knots_for(n, knots)
        columns = design_columns(method, k)
        df = n - columns - 1
        check = reachability(
            series, n, pairs, corrected_test, alpha, method, block_length, draws, knots
        )
        t_test = corrected_test == "t"
        if not check.reachable:
            note = "unreachable: " + check.reason
        elif t_test:
            note = "t-test: critical |r| as shown"
        else:
            note = (
                f"permutation test: no fixed critical |r| (set by the residuals); smallest "
                f"Holm p {check.smallest_holm:.3g} <= alpha {alpha:g}"
            )
        rows.append(
            {
                "series": series,
                "method": method,
                "knots": k if method == "spline" else None,
                "n": n,
                "df": df,
                "pairs": pairs,
                "test": corrected_test,
                "smallest_p": check.smallest_p,
                "smallest_holm": check.smallest_holm,
                "reachable": check.reachable,
                "checkpoints_needed": check.checkpoints_needed,
                "critical_r": critical_r(df, alpha) if t_test and check.reachable else None,
                "critical_r_holm": (
                    critical_r(df, alpha / max(pairs, 1)) if t_test and check.reachable else None
                ),
                "detectable_r": (
                    detectable_r(n, columns - 1, alpha, power) if check.reachable else None
                ),
                "note": note,
            }
        )
    return sorted(rows, key=lambda r: (r["series"], r["method"]))


def _num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "NA"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if 0 < abs(value) < 1e-3 else f"{value:.{digits}f}"
    return str(value)


def pair_markdown(
    table: pl.DataFrame, metric: str, headline: str = "linear", design: list[str] | None = None
) -> str:
    """The closing-note table: one line per series and OOD pair; ``design``: the design
    check's lines (``design.design_lines``), printed above it."""
    above = "".join(f"{line}\n" for line in design or [])
    head = above + (
        "| series | OOD a | OOD b | n | r linear | r spline | p (t, linear) | p perm "
        f"({headline}) | p Holm ({headline}) | p BH ({headline}) |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for r in pair_rows(table, metric):
        lines.append(
            "| "
            + " | ".join(
                [
                    r["series"],
                    r["ood_a"],
                    r["ood_b"],
                    _num(r["n_linear"]),
                    _num(r["r_linear"]),
                    _num(r["r_spline"]),
                    _num(r["p_value_linear"]),
                    _num(r[f"p_perm_{headline}"]),
                    _num(r[f"p_holm_{headline}"]),
                    _num(r[f"p_bh_{headline}"]),
                ]
            )
            + " |"
        )
    return head + "\n".join(lines) + "\n"
