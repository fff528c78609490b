"""The report's story, right after "At a glance": the figures that answer how stable the
model is, where and how bad, before any table.

- how stable: pooled SGS per axis with its 95% bootstrap interval, one marker per model,
  against the eps 0.05 reference (``sgs_intervals``);
- where: the dose-response by variant family and strength (``figures.dose_response``) and
  SGS per dataset and axis (``figures.heatmap``);
- how bad: the worst variants, ranked by the RMS of their normalised deltas over the axes
  (the headline's own ranking, ``headline.variant_rms``), with their worst axis
  (``worst_instances``; from instances.parquet, so only when the run holds it).

The remaining figures (radar, per-prompt distributions) are drawn further down, after the
tables (``more_figures``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from sago_core.report import figures, markup
from sago_core.report.figures import PAGE_WIDTH_IN, _png, _pyplot, short_labels
from sago_core.report.markup import Section
from sago_core.report.page.headline import variant_rms
from sago_core.vocabulary import AXES, POOLED

REFERENCE_EPS = 0.05  # the reference tolerance of the summary's test (one-sided E[s] > eps)
WORST_SHOWN = 8  # variants per model in the worst-instances figure
STORY = "story"  # the section's id

FIGURE_ALTS = {
    "sgs-intervals": "Pooled SGS per axis with 95% bootstrap intervals, one marker per model, "
    "against the eps 0.05 reference",
    "dose-response": "Dose-response: mean |normalised delta| by strength, per axis and "
    "variant family",
    "heatmap": "Heatmap: SGS per dataset and axis, one panel per model",
    "worst-instances": "The worst variants: RMS of their normalised deltas over the axes, "
    "labelled by prompt, family and strength, with their worst axis",
    "radar": "Radar: mean |normalised delta| per axis, one polygon per model",
    "distributions": "Box plots: per-prompt scores s per axis, one box per model",
}


def image(name: str, png: bytes) -> str:
    """An inlined PNG with its alt text from FIGURE_ALTS."""
    return markup.image(name, png, FIGURE_ALTS.get(name))


def _axes_order(frame: pl.DataFrame) -> list[str]:
    present = set(frame["axis"].drop_nulls().to_list())
    return [a for a in AXES if a in present] + sorted(present - set(AXES))


def draw_sgs_intervals(summary: pl.DataFrame) -> Any:
    """Pooled SGS per axis (rows) and model (markers), 95% CI as bars; NA written out."""
    plt = _pyplot()
    pooled = summary.filter(pl.col("dataset") == POOLED)
    models = sorted(pooled["model"].unique().to_list())
    axes = _axes_order(pooled)
    height = 0.9 + len(axes) * (0.28 + 0.16 * len(models))
    figure, ax = plt.subplots(figsize=(PAGE_WIDTH_IN * 0.72, height), layout="constrained")
    step = 0.7 / max(len(models), 1)
    rows = {(r["model"], r["axis"]): r for r in pooled.iter_rows(named=True)}
    for m, (model, label) in enumerate(zip(models, short_labels(models), strict=True)):
        offset = (m - (len(models) - 1) / 2) * step
        labelled = False
        for i, axis in enumerate(axes):
            row = rows.get((model, axis)) or {}
            y = i + offset
            if row.get("sgs") is None:
                ax.annotate("NA", (0, y), fontsize=7, color="#a00", va="center")
                continue
            low, high = row.get("ci_low"), row.get("ci_high")
            xerr = None
            if low is not None and high is not None:
                xerr = [[max(0.0, row["sgs"] - low)], [max(0.0, high - row["sgs"])]]
            ax.errorbar(
                row["sgs"],
                y,
                xerr=xerr,
                fmt="o",
                color=f"C{m % 10}",
                capsize=3,
                label=None if labelled else label,
            )
            labelled = True
    ax.axvline(REFERENCE_EPS, color="#888", linestyle="--", linewidth=1)
    ax.annotate(
        f"eps {REFERENCE_EPS:g}",
        (REFERENCE_EPS, 1.0),
        xycoords=("data", "axes fraction"),
        fontsize=7,
        color="#555",
        ha="left",
        va="bottom",
    )
    ax.set_yticks(range(len(axes)), axes)
    ax.set_ylim(len(axes) - 0.5, -0.5)
    ax.set_xlim(left=0)
    ax.set_xlabel("pooled SGS (0 = identical behaviour on every variant), 95% CI", fontsize=8)
    ax.set_title("How stable: pooled SGS per axis", fontsize=10)
    ax.grid(axis="x", color="#eee")
    if ax.get_legend_handles_labels()[0]:
        figure.legend(loc="outside lower center", ncol=min(3, len(models)), fontsize=8)
    return figure


def _label(row: dict[str, Any]) -> str:
    strength = row.get("strength")
    level = "" if strength is None else f" {float(strength):+g}"
    where = f"{row['dataset']}/{row['prompt_id']}"
    cut = where if len(where) <= 28 else "…" + where[-27:]
    return f"{cut} · {row['family']}/{row['subtype']}{level}"


def draw_worst_instances(instances: pl.DataFrame) -> Any:
    """Per model, the WORST_SHOWN variants with the highest RMS over the axes, as bars,
    each labelled by its prompt, family/subtype and strength and annotated with its worst
    axis."""
    plt = _pyplot()
    columns = [f"d_{a}" for a in AXES if f"d_{a}" in instances.columns]
    ranked = (
        instances.with_columns(variant_rms(columns).alias("rms"))
        .filter(pl.col("rms").is_not_null())
        .sort(["model", "rms"], descending=[False, True], maintain_order=True)
    )
    models = sorted(ranked["model"].unique().to_list())
    panels = max(len(models), 1)
    figure, axes = plt.subplots(
        panels,
        1,
        figsize=(PAGE_WIDTH_IN * 0.85, 0.7 + panels * (0.45 + 0.27 * WORST_SHOWN)),
        squeeze=False,
        layout="constrained",
    )
    for ax, model, label in zip(axes[:, 0], models, short_labels(models), strict=False):
        top = ranked.filter(pl.col("model") == model).head(WORST_SHOWN)
        rows = list(top.iter_rows(named=True))
        values = np.array([r["rms"] for r in rows])
        ax.barh(range(len(rows)), values, color="#D55E00", height=0.6)
        ax.set_yticks(range(len(rows)), [_label(r) for r in rows], fontsize=7)
        ax.set_ylim(len(rows) - 0.5, -0.5)
        for i, r in enumerate(rows):
            measured = [(c[2:], abs(r[c])) for c in columns if r[c] is not None]
            axis, value = max(measured, key=lambda item: item[1])
            ax.annotate(
                f" {r['rms']:.3g} (worst: {axis} {value:.3g})",
                (r["rms"], i),
                fontsize=7,
                va="center",
            )
        ax.set_xlim(0, float(values.max()) * 1.45 if len(values) else 1)
        ax.set_title(label, fontsize=9)
        ax.tick_params(axis="x", labelsize=7)
    if not models:
        axes[0, 0].text(0.5, 0.5, "no variant has a measured delta", ha="center")
    figure.suptitle(
        "How bad: the worst variants (RMS of normalised deltas over the axes)", fontsize=10
    )
    return figure


def story_section(
    summary: pl.DataFrame,
    variant_deltas: pl.DataFrame,
    instances: pl.DataFrame | None,
) -> Section:
    parts = [
        image("sgs-intervals", _png(draw_sgs_intervals(summary))),
        image("dose-response", figures.dose_response(variant_deltas)),
        image("heatmap", figures.heatmap(summary)),
    ]
    if instances is not None and len(instances):
        parts.append(image("worst-instances", _png(draw_worst_instances(instances))))
    else:
        parts.append(
            "<p>The worst variants need instances.parquet, which this run does not hold "
            "(the explorer and the tail table come from it too).</p>"
        )
    intro = (
        "<p>How stable (pooled SGS per axis, lower is more stable), where (by variant family "
        "and strength; by dataset) and how bad (the worst variants). The tables below give "
        "every number.</p>"
    )
    return Section(STORY, "How stable, where, how bad", intro + "".join(parts))


def more_figures(scores: pl.DataFrame, variant_deltas: pl.DataFrame) -> Section:
    body = image("radar", figures.radar(variant_deltas)) + image(
        "distributions", figures.distributions(scores)
    )
    return Section("figures", "More figures", body)
