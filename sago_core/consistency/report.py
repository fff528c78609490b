"""consistency.html (self-contained) and its heatmap: partial-correlation matrices per family.

Sections: what was compared and the training split (and its check against the evaluation);
the headline metric's pairs (r linear and spline, t and permutation p, Holm and BH); the
minimum detectable |r| at the study's size; where linear and spline adjustment disagree in
sign or significance; the checkpoint scores (metric x dataset, one row per checkpoint); per
metric, one OOD x OOD matrix per family for the headline adjustment with r, p and n in each
cell (NA with the reason where r is undefined); the heatmap figure; sign agreement between
families, over all pairs and over pairs significant in both.
"""

from __future__ import annotations

import html
from typing import Any

import numpy as np
import polars as pl

from sago_core.consistency.design import design_lines, study_reachability
from sago_core.consistency.matrix import method_disagreements
from sago_core.consistency.summary import detectable_rows, pair_rows
from sago_core.report.figures import _png, _pyplot
from sago_core.report.html import STYLE, _fmt, _image, _table
from sago_core.statistics.partial_correlation import KNOT_QUANTILES


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
    figure.supxlabel("adjustment: " + ", ".join(sorted(table["method"].unique().to_list())))
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
    keys = ["family", "metric", "method", "missing_reason"]
    gaps = table.filter(pl.col("r").is_null()).group_by(keys).len()
    perm = table.filter(pl.col("r").is_not_null() & pl.col("p_perm").is_null())
    perm_gaps = perm.group_by("family", "metric", "method", "perm_reason").len()
    if not len(gaps) and not len(perm_gaps):
        return "<p>Every partial correlation and permutation p is defined.</p>"
    rows = [
        [
            html.escape(r["family"]),
            r["metric"],
            r["method"],
            "r: " + html.escape(r["missing_reason"]),
            str(r["len"]),
        ]
        for r in gaps.sort("family", "metric", "method").iter_rows(named=True)
    ] + [
        [
            html.escape(r["family"]),
            r["metric"],
            r["method"],
            "permutation p: " + html.escape(r["perm_reason"]),
            str(r["len"]),
        ]
        for r in perm_gaps.sort("family", "metric", "method").iter_rows(named=True)
    ]
    return _table(["family", "metric", "method", "why NA", "pairs"], rows, left=4)


def _split_section(split: dict[str, Any]) -> str:
    series = split.get("series_split")
    trained = [c for c in split["checkpoints"] if c["training_split"]]
    lines = [
        f"<p>Evaluation: {split['evaluation_prompts']} prompts in "
        + ", ".join(f"<code>{html.escape(d)}</code>" for d in split["evaluation_datasets"])
        + f". Check: {html.escape(split['check'])}.</p>"
    ]
    if series:
        lines.append(
            f"<p>Series training split <code>{html.escape(series['name'])}</code>: "
            f"{len(series['rows'])} rows, sha256 <code>{series['digest'][:12]}</code>; "
            "disjoint from every evaluation set.</p>"
        )
    lines.append(
        f"<p>{len(trained)} of {len(split['checkpoints'])} checkpoints record a training split "
        "(all checked); the others (quantised or external) were not fine-tuned by sago.</p>"
    )
    return "".join(lines)


def _pair_section(table: pl.DataFrame, metric: str, headline: str) -> str:
    rows = []
    for r in pair_rows(table, metric):
        rows.append(
            [
                html.escape(r["family"]),
                html.escape(r["ood_a"]),
                html.escape(r["ood_b"]),
                _fmt(r["n_linear"]),
                _fmt(r["r_linear"], 3),
                _fmt(r["r_spline"], 3),
                _fmt(r["p_value_linear"], 3),
                _fmt(r["p_value_spline"], 3),
                _fmt(r[f"p_perm_{headline}"], 3),
                _fmt(r[f"p_holm_{headline}"], 3),
                _fmt(r[f"p_bh_{headline}"], 3),
                _fmt(r[f"significant_{headline}"]),
                html.escape(r[f"reason_{headline}"] or ""),
            ]
        )
    if not rows:
        return f"<p>No partial correlation for metric <code>{html.escape(metric)}</code>.</p>"
    headers = [
        "family",
        "OOD a",
        "OOD b",
        "n",
        "r linear",
        "r spline",
        "p t linear",
        "p t spline",
        f"p perm {headline}",
        f"p Holm {headline}",
        f"p BH {headline}",
        "significant",
        "why NA",
    ]
    return _table(headers, rows, left=3)


def _detectable_section(table: pl.DataFrame, stats: dict[str, Any]) -> str:
    alpha = stats["alpha"]
    rows = [
        [
            html.escape(r["family"]),
            r["method"] + (f" ({r['knots']} knots)" if r["knots"] else ""),
            str(r["n"]),
            str(r["df"]),
            str(r["pairs"]),
            _fmt(r["smallest_holm"], 3),
            "yes" if r["reachable"] else "<b>no</b>",
            _fmt(r["critical_r"], 3),
            _fmt(r["critical_r_holm"], 3),
            _fmt(r["detectable_r"], 3),
            html.escape(r["note"]),
        ]
        for r in detectable_rows(
            table,
            stats["spline_knots"],
            alpha,
            stats["corrected_test"],
            stats["block_length"],
            stats["permutation_draws"],
        )
    ]
    headers = [
        "family",
        "method",
        "n",
        "df",
        "pairs",
        f"smallest Holm p ({stats['corrected_test']})",
        f"significance reachable (alpha {alpha:g})",
        f"critical |r| (alpha {alpha:g})",
        "critical |r| (Holm, first step)",
        "detectable |r| (80% power)",
        "note",
    ]
    return (
        f"<p>Critical |r| from the test Holm corrects ({html.escape(stats['corrected_test'])}"
        "); a permutation test has no fixed critical |r|. NA where significance is "
        "unreachable: no |r| can be detected there.</p>" + _table(headers, rows, left=2)
    )


def _design_section(settings: dict[str, Any]) -> str:
    """The design check (``sago_core.consistency.design``) from the study's settings."""
    stats = settings["statistics"]
    checks = study_reachability(
        {name: len(models) for name, models in settings["families"].items()},
        len(settings["out_of_distribution"]),
        stats["corrected_test"],
        stats["alpha"],
        stats["block_length"],
        stats["permutation_draws"],
        stats["spline_knots"],
    )
    verdict, *lines = design_lines(checks)
    css = "" if all(c.reachable for c in checks) else ' class="na"'
    items = "".join(f"<li>{html.escape(line.strip())}</li>" for line in lines)
    return f"<p{css}><b>{html.escape(verdict)}</b></p><ul>{items}</ul>"


def _disagreement_section(table: pl.DataFrame) -> str:
    gaps = method_disagreements(table)
    if not len(gaps):
        return "<p>Linear and spline adjustment agree in sign and significance everywhere.</p>"
    rows = [
        [
            html.escape(r["family"]),
            r["metric"],
            html.escape(r["ood_a"]),
            html.escape(r["ood_b"]),
            _fmt(r["r_linear"], 3),
            _fmt(r["r_spline"], 3),
            "sign" if r["sign_differs"] else "",
            "significance" if r["significance_differs"] else "",
        ]
        for r in gaps.iter_rows(named=True)
    ]
    headers = ["family", "metric", "OOD a", "OOD b", "r linear", "r spline", "differs", ""]
    return _table(headers, rows, left=4)


def _agreement_section(agreement: pl.DataFrame) -> str:
    rows = [
        [
            r["metric"],
            r["method"],
            html.escape(r["family_a"]),
            html.escape(r["family_b"]),
            str(r["pairs_compared"]),
            str(r["agreeing"]),
            _fmt(r["share"], 3),
            str(r["significant_pairs"]),
            str(r["significant_agreeing"]),
            _fmt(r["significant_share"], 3),
        ]
        for r in agreement.iter_rows(named=True)
    ]
    if not rows:
        return "<p>One family only: nothing to compare signs with.</p>"
    headers = [
        "metric",
        "method",
        "family A",
        "family B",
        "pairs (all)",
        "same sign",
        "share",
        "pairs significant in both",
        "same sign",
        "share",
    ]
    return _table(headers, rows, 4)


def render_consistency(
    scores: pl.DataFrame,
    table: pl.DataFrame,
    agreement: pl.DataFrame,
    settings: dict[str, Any],
    split: dict[str, Any],
) -> str:
    oods = list(settings["out_of_distribution"])
    stats = settings["statistics"]
    headline, metric, knots = stats["adjustment"], stats["report_metric"], stats["spline_knots"]
    knot_text = (
        f"{knots} knots at the "
        + ", ".join(f"{q:g}" for q in KNOT_QUANTILES[knots])
        + f" quantiles; n-{knots + 1} df"
        if knots is not None
        else "knots by the number of checkpoints n: n // 2 - 1 within 3..7, at Harrell's "
        "quantiles; n-knots-1 df"
    )
    chosen = table.filter(pl.col("method") == headline)
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
        "on two OOD datasets, controlling for the same metric on the ID dataset: both are "
        "regressed on ID and the residuals correlated. Adjustments: <b>linear</b> (1, ID; "
        "t-test with n-3 df) and <b>spline</b> (natural cubic spline of ID with "
        f"{knot_text}; it reduces, not removes, the shared curvature of a saturating ID "
        "relation). Permutation p: whole "
        f"blocks of {stats['block_length']} consecutive checkpoints reordered (order-respecting). "
        f"Holm and BH correct the {stats['corrected_test']} p over the pairs of one family, "
        f"metric and method; significant = Holm p &le; {stats['alpha']:g}. Headline "
        f"adjustment: <b>{html.escape(headline)}</b>.</p>",
        "<h2>Can this study reach significance?</h2>",
        _design_section(settings),
        "<h2>Training split</h2>",
        _split_section(split),
        f"<h2>OOD pairs: {html.escape(metric)}</h2>",
        _pair_section(table, metric, headline),
        "<h2>Minimum detectable |r| at this study's size</h2>",
        _detectable_section(table, stats),
        "<h2>Where linear and spline adjustment disagree</h2>",
        _disagreement_section(table),
        "<h2>Checkpoint scores</h2>",
        _scores_table(scores),
        f"<h2>Partial correlations ({html.escape(headline)} adjustment)</h2>",
        _matrices(chosen, oods),
        "<h2>Where r is undefined</h2>",
        _undefined(table),
        "<h2>Heatmap</h2>",
        _image("partial-correlations", heatmap(chosen, oods)),
        "<h2>Sign agreement between families</h2>",
        _agreement_section(agreement),
    ]
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>SAGO consistency</title>"
        f"<style>{STYLE}</style></head><body>{''.join(sections)}</body></html>"
    )
