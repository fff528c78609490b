"""The study's page, consistency.html (self-contained; the file keeps its first name so
saved study folders stay as they were), and its figures.

Sections, in order (``markup.Section``): the question and the method; can the study reach
significance (the design check); the headline metric's OOD pairs (r linear and spline, t and
permutation p, Holm and BH); the pair-by-pair matrix figure (per metric and series, an OOD x
OOD heatmap of partial r, significant pairs marked); each metric along the checkpoint series
(one panel per metric and series, a line per dataset); the training split (and its check
against the evaluation); the minimum detectable |r| at the study's size; where linear and
spline adjustment disagree; the checkpoint scores (metric x dataset, one row per checkpoint,
scrolling inside its own box); the matrices as tables with r, p and n in each cell (NA with
the reason where r is undefined); sign agreement between series.
"""

from __future__ import annotations

import html
import math
from typing import Any

import numpy as np
import polars as pl

from sago_core.report.figures import DARK_TEXT, PAGE_WIDTH_IN, _png, _pyplot, text_colour
from sago_core.report.markup import Section, page
from sago_core.report.markup import fmt as _fmt
from sago_core.report.markup import image as _image
from sago_core.report.markup import table as _table
from sago_core.report.page.html import STYLE
from sago_core.statistics.partial_correlation import KNOT_QUANTILES
from sago_core.study.design import design_lines, study_reachability
from sago_core.study.matrix import method_disagreements
from sago_core.study.summary import detectable_rows, pair_rows


def _index(table: pl.DataFrame) -> dict[tuple[str, str, str, str], dict[str, Any]]:
    rows = table.iter_rows(named=True)
    return {(r["series"], r["metric"], r["ood_a"], r["ood_b"]): r for r in rows}


PANEL_COLUMNS = 4  # panels per row at the page's width


def _ordered_metrics(table: pl.DataFrame, first: str | None) -> list[str]:
    """The metrics, the report's own first (the one the question is asked on)."""
    metrics = sorted(table["metric"].unique().to_list())
    if first is None or first not in metrics:
        return metrics
    return [first, *(m for m in metrics if m != first)]


def _short(name: str, width: int = 18) -> str:
    """``name`` cut in the middle to ``width`` characters (its end tells datasets apart)."""
    if len(name) <= width:
        return name
    head = (width - 1) // 2
    return name[:head] + "…" + name[-(width - 1 - head) :]


def _draw_heatmap(
    table: pl.DataFrame, out_of_distribution: list[str], first_metric: str | None = None
) -> Any:
    """One OOD x OOD panel per (metric, series), the report's metric first, PANEL_COLUMNS to a
    row: r in each cell (text dark or white by the cell's luminance), ``*`` where the pair
    is significant (Holm p <= alpha), NA where r is undefined, the diagonal left blank."""
    plt = _pyplot()
    from matplotlib.colors import Normalize

    metrics = _ordered_metrics(table, first_metric)
    names = sorted(table["series"].unique().to_list())
    panels = [(m, f) for m in metrics for f in names]
    k = len(out_of_distribution)
    # more datasets, fewer and wider panels to a row: a cell must hold "+0.00*"
    few = k <= 4  # four panels to a row, names cut to 14 and slanted; else upright, wider
    per_row = PANEL_COLUMNS if few else PANEL_COLUMNS - 1 if k <= 6 else PANEL_COLUMNS - 2
    ncols = max(1, min(per_row, len(panels)))
    nrows = max(1, math.ceil(len(panels) / ncols))
    side = min(1.0 + 0.55 * k, (PAGE_WIDTH_IN - 0.8) / ncols)
    figure, axes = plt.subplots(
        nrows,
        ncols,
        figsize=(min(PAGE_WIDTH_IN, 0.8 + side * ncols), 0.9 + 0.85 * side * nrows),
        squeeze=False,
        layout="constrained",
    )
    index = _index(table)
    cmap, norm = plt.get_cmap("RdBu_r"), Normalize(vmin=-1, vmax=1)
    image = None
    labels = [_short(d, 14 if few else 18) for d in out_of_distribution]
    # a cell holds "+0.00*" (6 characters of about 0.6 em): the font that fits its width
    cell_in = max(side - (1.0 if few else 1.4), 0.5) / max(k, 1)  # less the tick labels
    size = max(4.0, min(7.0, cell_in * 72 * 0.9 / 3.6))
    for ax, (metric, name) in zip(axes.flat, panels, strict=False):
        grid = np.full((k, k), np.nan)
        marks = np.full((k, k), "", dtype=object)
        for a, da in enumerate(out_of_distribution):
            for b, db in enumerate(out_of_distribution):
                row = index.get((name, metric, da, db)) or index.get((name, metric, db, da))
                if a != b and row is not None and row["r"] is not None:
                    grid[a, b] = row["r"]
                    marks[a, b] = "*" if row["significant"] else ""
        image = ax.imshow(grid, cmap=cmap, norm=norm)
        for (a, b), value in np.ndenumerate(grid):
            if a == b:
                text, colour = "—", "grey"
            elif np.isnan(value):
                text, colour = "NA", DARK_TEXT
            else:
                text, colour = f"{value:+.2f}{marks[a, b]}", text_colour(cmap(norm(value)))
            ax.text(b, a, text, ha="center", va="center", fontsize=size, color=colour)
        if few:
            ax.set_xticks(range(k), labels, fontsize=7, rotation=45, ha="right")
        else:
            ax.set_xticks(range(k), labels, fontsize=7, rotation=90)
        ax.set_yticks(range(k), labels, fontsize=7)
        ax.set_title(f"{metric} — {name}", fontsize=8)
    for ax in list(axes.flat)[len(panels) :]:
        ax.remove()
    if image is not None:
        figure.colorbar(
            image, ax=[a for a in axes.flat if a.figure is figure], shrink=0.6, label="partial r"
        )
    methods = ", ".join(sorted(table["method"].unique().to_list()))
    figure.suptitle(
        "Partial correlation across checkpoints of two OOD datasets, controlling for the ID "
        f"score ({methods} adjustment); * significant (Holm)",
        fontsize=9,
    )
    return figure


def heatmap(
    table: pl.DataFrame, out_of_distribution: list[str], first_metric: str | None = None
) -> bytes:
    return _png(_draw_heatmap(table, out_of_distribution, first_metric))


def _draw_series(
    scores: pl.DataFrame, in_distribution: str, first_metric: str | None = None
) -> Any:
    """Each metric along the checkpoints of each series: one panel per (metric, series), one line
    per dataset (the ID dataset thick and dashed), a missing value a gap in its line."""
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator

    metrics = _ordered_metrics(scores, first_metric)
    names = list(dict.fromkeys(scores.sort("series")["series"].to_list()))
    datasets = sorted(scores["dataset"].unique().to_list(), key=lambda d: (d != in_distribution, d))
    colours = {d: f"C{i % 10}" for i, d in enumerate(datasets)}
    panels = [(m, f) for m in metrics for f in names]
    ncols = max(1, min(PANEL_COLUMNS, len(panels)))
    nrows = max(1, math.ceil(len(panels) / ncols))
    figure, axes = plt.subplots(
        nrows,
        ncols,
        figsize=(PAGE_WIDTH_IN, 1.0 + 2.1 * nrows),
        squeeze=False,
        layout="constrained",
    )
    legend: dict[str, Any] = {}
    for ax, (metric, name) in zip(axes.flat, panels, strict=False):
        chosen = scores.filter((pl.col("metric") == metric) & (pl.col("series") == name))
        for dataset in datasets:
            line = chosen.filter(pl.col("dataset") == dataset).sort("position")
            if not len(line):
                continue
            values = [np.nan if v is None else v for v in line["value"].to_list()]
            is_id = dataset == in_distribution
            (handle,) = ax.plot(
                line["position"].to_list(),
                values,
                marker=".",
                color=colours[dataset],
                linestyle="--" if is_id else "-",
                linewidth=2.2 if is_id else 1.2,
            )
            legend.setdefault(f"{dataset} (ID)" if is_id else dataset, handle)
        if not len(chosen.drop_nulls("value")):
            ax.text(0.5, 0.5, "NA", ha="center", va="center", transform=ax.transAxes)
        ax.xaxis.set_major_locator(MaxNLocator(6, integer=True))
        ax.yaxis.set_major_locator(MaxNLocator(4))
        ax.tick_params(labelsize=7)
        ax.set_title(f"{metric} — {name}", fontsize=8)
        ax.set_xlabel("checkpoint (position)", fontsize=7)
        ax.set_ylabel(metric, fontsize=7)
    for ax in list(axes.flat)[len(panels) :]:
        ax.remove()
    if legend:
        figure.legend(
            list(legend.values()),
            list(legend),
            loc="outside lower center",
            ncol=min(len(legend), 6),
            fontsize=8,
            title="dataset",
            title_fontsize=8,
        )
    figure.suptitle("Each metric along the checkpoint series, one line per dataset", fontsize=10)
    return figure


def series(scores: pl.DataFrame, in_distribution: str, first_metric: str | None = None) -> bytes:
    return _png(_draw_series(scores, in_distribution, first_metric))


def _scores_table(scores: pl.DataFrame) -> str:
    wide = scores.with_columns(
        pl.concat_str([pl.col("metric"), pl.lit(" @ "), pl.col("dataset")]).alias("column")
    ).pivot(on="column", index=["series", "position", "model"], values="value")
    wide = wide.sort("series", "position")
    columns = [c for c in wide.columns if c not in ("series", "position", "model")]
    rows = [
        [html.escape(r["series"]), str(r["position"]), html.escape(r["model"])]
        + [_fmt(r[c]) for c in columns]
        for r in wide.iter_rows(named=True)
    ]
    return _table(["series", "#", "model", *columns], rows, left=3)


def _matrices(table: pl.DataFrame, out_of_distribution: list[str]) -> str:
    parts = []
    index = _index(table)
    for metric in sorted(table["metric"].unique().to_list()):
        parts.append(f"<h3>{html.escape(metric)}</h3>")
        for name in sorted(table["series"].unique().to_list()):
            body = []
            for da in out_of_distribution:
                cells = []
                for db in out_of_distribution:
                    row = index.get((name, metric, da, db)) or index.get((name, metric, db, da))
                    if da == db or row is None:
                        cells.append("—")
                    elif row["r"] is None:
                        reason = html.escape(row["missing_reason"] or "")
                        cells.append(f'<span class="na" title="{reason}">NA</span>')
                    else:
                        cells.append(f"{row['r']:+.3f} (p={_fmt(row['p_value'], 3)}, n={row['n']})")
                body.append([html.escape(da), *cells])
            parts.append(f"<p><b>{html.escape(name)}</b></p>")
            parts.append(_table(["OOD", *[html.escape(d) for d in out_of_distribution]], body))
    return "".join(parts)


def _undefined(table: pl.DataFrame) -> str:
    keys = ["series", "metric", "method", "missing_reason"]
    gaps = table.filter(pl.col("r").is_null()).group_by(keys).len()
    perm = table.filter(pl.col("r").is_not_null() & pl.col("p_perm").is_null())
    perm_gaps = perm.group_by("series", "metric", "method", "perm_reason").len()
    if not len(gaps) and not len(perm_gaps):
        return "<p>Every partial correlation and permutation p is defined.</p>"
    rows = [
        [
            html.escape(r["series"]),
            r["metric"],
            r["method"],
            "r: " + html.escape(r["missing_reason"]),
            str(r["len"]),
        ]
        for r in gaps.sort("series", "metric", "method").iter_rows(named=True)
    ] + [
        [
            html.escape(r["series"]),
            r["metric"],
            r["method"],
            "permutation p: " + html.escape(r["perm_reason"]),
            str(r["len"]),
        ]
        for r in perm_gaps.sort("series", "metric", "method").iter_rows(named=True)
    ]
    return _table(["series", "metric", "method", "why NA", "pairs"], rows, left=4)


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
                html.escape(r["series"]),
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
        "series",
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
            html.escape(r["series"]),
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
        "series",
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
    """The design check (``sago_core.study.design``) from the study's settings."""
    stats = settings["statistics"]
    checks = study_reachability(
        {name: len(models) for name, models in settings["series"].items()},
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
            html.escape(r["series"]),
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
    headers = ["series", "metric", "OOD a", "OOD b", "r linear", "r spline", "differs", ""]
    return _table(headers, rows, left=4)


def _agreement_section(agreement: pl.DataFrame) -> str:
    rows = [
        [
            r["metric"],
            r["method"],
            html.escape(r["series_a"]),
            html.escape(r["series_b"]),
            str(r["dataset_pairs"]),
            str(r["agreeing"]),
            _fmt(r["share"], 3),
            str(r["significant_pairs"]),
            str(r["significant_agreeing"]),
            _fmt(r["significant_share"], 3),
        ]
        for r in agreement.iter_rows(named=True)
    ]
    if not rows:
        return "<p>One series only: nothing to compare signs with.</p>"
    headers = [
        "metric",
        "method",
        "series A",
        "series B",
        "pairs (all)",
        "same sign",
        "share",
        "pairs significant in both",
        "same sign",
        "share",
    ]
    return _table(headers, rows, 4)


def render_study(
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
    names = ", ".join(
        f"{html.escape(name)} ({len(models)} checkpoints)"
        for name, models in settings["series"].items()
    )
    sections: list[Section | str] = [
        "<h1>Do results on one dataset predict another?</h1>",
        f"<p>Series: {names}. In-distribution: <code>"
        f"{html.escape(settings['in_distribution'])}</code>; out-of-distribution: "
        + ", ".join(f"<code>{html.escape(d)}</code>" for d in oods)
        + ". Each cell is the partial correlation across a series' checkpoints of the metric "
        "on two OOD datasets, controlling for the same metric on the ID dataset: both are "
        "regressed on ID and the residuals correlated. Adjustments: <b>linear</b> (1, ID; "
        "t-test with n-3 df) and <b>spline</b> (natural cubic spline of ID with "
        f"{knot_text}; it reduces, not removes, the shared curvature of a saturating ID "
        "relation). Permutation p: whole "
        f"blocks of {stats['block_length']} consecutive checkpoints reordered (order-respecting). "
        f"Holm and BH correct the {stats['corrected_test']} p over the pairs of one series, "
        f"metric and method; significant = Holm p &le; {stats['alpha']:g}. Headline "
        f"adjustment: <b>{html.escape(headline)}</b>.</p>",
        Section("design", "Can this study reach significance?", _design_section(settings)),
        Section("pairs", f"OOD pairs: {metric}", _pair_section(table, metric, headline)),
        Section(
            "pair-matrix",
            f"Partial correlations across OOD pairs ({headline} adjustment)",
            "<p>One matrix per metric and series (the metric above first): each cell the "
            "partial r of the metric on two OOD datasets across the series' checkpoints, "
            "controlling for the ID score; * marks a pair significant after Holm; NA: r "
            "undefined (why below).</p>"
            + _image(
                "partial-correlations",
                heatmap(chosen, oods, metric),
                f"Heatmap: partial correlation r for every OOD pair, per metric and series, "
                f"{headline} adjustment, significant pairs marked *",
            ),
        ),
        Section(
            "series",
            "Each metric along the checkpoint series",
            "<p>What the correlations are computed from: every metric at each checkpoint of "
            f"each series, one line per dataset (the ID dataset <code>"
            f"{html.escape(settings['in_distribution'])}</code> dashed).</p>"
            + _image(
                "checkpoint-series",
                series(scores, settings["in_distribution"], metric),
                "Line charts: each metric by checkpoint position, per series, one line per dataset",
            ),
        ),
        Section("split", "Training split", _split_section(split)),
        Section(
            "detectable",
            "Minimum detectable |r| at this study's size",
            _detectable_section(table, stats),
        ),
        Section(
            "disagreement",
            "Where linear and spline adjustment disagree",
            _disagreement_section(table),
        ),
        Section("scores", "Checkpoint scores", _scores_table(scores)),
        Section(
            "matrices",
            f"Partial correlations ({headline} adjustment), with p and n",
            _matrices(chosen, oods),
        ),
        Section("undefined", "Where r is undefined", _undefined(table)),
        Section("agreement", "Sign agreement between series", _agreement_section(agreement)),
    ]
    return page("SAGO study", STYLE, sections)
