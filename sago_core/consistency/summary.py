"""The study's headline tables as data: one row per OOD pair and family for one metric (r
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
)


def pair_rows(table: pl.DataFrame, metric: str) -> list[dict[str, Any]]:
    """Per (family, OOD pair): r, p, p_perm, p_holm, p_bh and significance for each method."""
    mine = table.filter(pl.col("metric") == metric)
    index = {
        (r["family"], r["ood_a"], r["ood_b"], r["method"]): r for r in mine.iter_rows(named=True)
    }
    keys = sorted({(f, a, b) for f, a, b, _ in index})
    rows = []
    for family, a, b in keys:
        row: dict[str, Any] = {"family": family, "ood_a": a, "ood_b": b}
        for method in ADJUSTMENTS:
            cell = index.get((family, a, b, method), {})
            for column in ("r", "p_value", "p_perm", "p_holm", "p_bh", "significant", "n"):
                row[f"{column}_{method}"] = cell.get(column)
            row[f"reason_{method}"] = cell.get("missing_reason") or cell.get("perm_reason")
        rows.append(row)
    return rows


def detectable_rows(
    table: pl.DataFrame, knots: int, alpha: float, power: float = 0.8
) -> list[dict[str, Any]]:
    """Per family and method at the family's largest n: df, the critical |r| of the t-test
    (uncorrected, and at Holm's first step alpha / pairs), and the |r| detected with
    ``power`` (Fisher z)."""
    rows = []
    for (family, method), frame in table.group_by(["family", "method"], maintain_order=True):
        n = int(frame["n"].max() or 0)  # type: ignore[arg-type]
        pairs = frame.select("ood_a", "ood_b").unique().height
        columns = design_columns(method, knots)
        df = n - columns - 1
        rows.append(
            {
                "family": family,
                "method": method,
                "n": n,
                "df": df,
                "pairs": pairs,
                "critical_r": critical_r(df, alpha),
                "critical_r_holm": critical_r(df, alpha / max(pairs, 1)),
                "detectable_r": detectable_r(n, columns - 1, alpha, power),
            }
        )
    return sorted(rows, key=lambda r: (r["family"], r["method"]))


def _num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "NA"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if 0 < abs(value) < 1e-3 else f"{value:.{digits}f}"
    return str(value)


def pair_markdown(table: pl.DataFrame, metric: str, headline: str = "linear") -> str:
    """The closing-note table: one line per family and OOD pair."""
    head = (
        "| family | OOD a | OOD b | n | r linear | r spline | p (t, linear) | p perm "
        f"({headline}) | p Holm ({headline}) | p BH ({headline}) |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for r in pair_rows(table, metric):
        lines.append(
            "| "
            + " | ".join(
                [
                    r["family"],
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
