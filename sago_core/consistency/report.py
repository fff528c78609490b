"""consistency.html (self-contained) and its heatmap: partial-correlation matrices per family.

Sections: what was compared; the checkpoint scores (metric x dataset, one row per
checkpoint); per metric, one OOD x OOD matrix per family with r, p and n in each cell (NA with
the reason where r is undefined); the heatmap figure; sign agreement between families.
"""

from __future__ import annotations

import html
from typing import Any

import numpy as np
import polars as pl

from sago_core.report.figures import _png, _pyplot
from sago_core.report.html import STYLE, _fmt, _image, _table


def _index(table: pl.DataFrame) -> dict[tuple[str, str, str, str], dict[str, Any]]:
    rows = table.iter_rows(named=True)
    return {(r["family"], r["metric"], r["ood_a"], r["ood_b"]): r for r in rows}


def heatmap(table: pl.DataFrame, out_of_distribution: list[str]) -> bytes:
    """Rows: metrics; columns: families; each panel an OOD x OOD matrix of r (NA blank)."""
    plt = _pyplot()
    metrics = sorted(table["metric"].unique().to_list())
    families = sorted(table["family"].unique().to_list())
    k = len(out_of_distribution)
    figure, axes = plt.subplots(
        len(metrics),
        len(families),
        figsize=(1.5 + 0.9 * k * len(families), 0.8 + 0.75 * k * len(metrics)),
        squeeze=False,
    )
    index = _index(table)
    image = None
    for i, metric in enumerate(metrics):
        for j, family in enumerate(families):
            grid = np.full((k, k), np.nan)
            for a, da in enumerate(out_of_distribution):
                grid[a, a] = 1.0
                for b, db in enumerate(out_of_distribution):
                    row = index.get((family, metric, da, db)) or index.get((family, metric, db, da))
                    if row is not None and row["r"] is not None:
                        grid[a, b] = row["r"]
            ax = axes[i][j]
            image = ax.imshow(grid, cmap="RdBu_r", vmin=-1, vmax=1)
            for (a, b), value in np.ndenumerate(grid):
                label = "NA" if np.isnan(value) else f"{value:.2f}"
                ax.text(b, a, label, ha="center", va="center", fontsize=6)
            ax.set_xticks(range(k), [d[:12] for d in out_of_distribution], fontsize=6, rotation=60)
            ax.set_yticks(range(k), [d[:12] for d in out_of_distribution], fontsize=6)
            ax.set_title(f"{metric} — {family}", fontsize=8)
    if image is not None:
        figure.colorbar(image, ax=axes, fraction=0.02)
    figure.suptitle("Partial correlation across checkpoints, controlling for the ID score")
    return _png(figure)


def _scores_table(scores: pl.DataFrame) -> str:
    wide = scores.with_columns(
        pl.concat_str([pl.col("metric"), pl.lit(" @ "), pl.col("dataset")]).alias("column")
    ).pivot(on="column", index=["family", "position", "model"], values="value")
    wide = wide.sort("family", "position")
    columns = [c for c in wide.columns if c not in ("family", "position", "model")]
    rows = [
        [html.escape(r["family"]), str(r["position"]), html.escape(r["model"])]
        + [_fmt(r[c]) for c in columns]
        for r in wide.iter_rows(named=True)
    ]
    return _table(["family", "#", "model", *columns], rows, left=3)


def _matrices(table: pl.DataFrame, out_of_distribution: list[str]) -> str:
    parts = []
    index = _index(table)
    for metric in sorted(table["metric"].unique().to_list()):
        parts.append(f"<h3>{html.escape(metric)}</h3>")
        for family in sorted(table["family"].unique().to_list()):
            body = []
            for da in out_of_distribution:
                cells = []
                for db in out_of_distribution:
                    row = index.get((family, metric, da, db)) or index.get((family, metric, db, da))
                    if da == db or row is None:
                        cells.append("—")
                    elif row["r"] is None:
                        reason = html.escape(row["missing_reason"] or "")
                        cells.append(f'<span class="na" title="{reason}">NA</span>')
                    else:
                        cells.append(f"{row['r']:+.3f} (p={_fmt(row['p_value'], 3)}, n={row['n']})")
                body.append([html.escape(da), *cells])
            parts.append(f"<p><b>{html.escape(family)}</b></p>")
            parts.append(_table(["OOD", *[html.escape(d) for d in out_of_distribution]], body))
    return "".join(parts)


def _undefined(table: pl.DataFrame) -> str:
    gaps = table.filter(pl.col("r").is_null()).group_by("family", "metric", "missing_reason").len()
    if not len(gaps):
        return "<p>Every partial correlation is defined.</p>"
    rows = [
        [html.escape(r["family"]), r["metric"], html.escape(r["missing_reason"]), str(r["len"])]
        for r in gaps.sort("family", "metric").iter_rows(named=True)
    ]
    return _table(["family", "metric", "why r is NA", "pairs"], rows, left=3)


def render_consistency(
    scores: pl.DataFrame,
    table: pl.DataFrame,
    agreement: pl.DataFrame,
    settings: dict[str, Any],
) -> str:
    oods = list(settings["out_of_distribution"])
    agree_rows = [
        [
            r["metric"],
            html.escape(r["family_a"]),
            html.escape(r["family_b"]),
            str(r["pairs_compared"]),
            str(r["agreeing"]),
            _fmt(r["share"], 3),
        ]
        for r in agreement.iter_rows(named=True)
    ]
    families = ", ".join(
        f"{html.escape(name)} ({len(models)} checkpoints)"
        for name, models in settings["families"].items()
    )
    sections = [
        "<h1>Do results on one dataset predict another?</h1>",
        f"<p>Families: {families}. In-distribution: <code>"
        f"{html.escape(settings['in_distribution'])}</code>; out-of-distribution: "
        + ", ".join(f"<code>{html.escape(d)}</code>" for d in oods)
        + ". Each cell is the partial correlation across a family's checkpoints of the metric "
        "on two OOD datasets, controlling for the same metric on the ID dataset (both regressed "
        "on ID, residuals correlated; two-sided t-test with n-3 df).</p>",
        "<h2>Checkpoint scores</h2>",
        _scores_table(scores),
        "<h2>Partial correlations</h2>",
        _matrices(table, oods),
        "<h2>Where r is undefined</h2>",
        _undefined(table),
        "<h2>Heatmap</h2>",
        _image("partial-correlations", heatmap(table, oods)),
        "<h2>Sign agreement between families</h2>",
        _table(["metric", "family A", "family B", "pairs", "same sign", "share"], agree_rows, 3)
        if agree_rows
        else "<p>One family only: nothing to compare signs with.</p>",
    ]
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>SAGO consistency</title>"
        f"<style>{STYLE}</style></head><body>{''.join(sections)}</body></html>"
    )
