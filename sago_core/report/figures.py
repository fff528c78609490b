"""The report's figures as PNG bytes (matplotlib, headless Agg backend), from artifacts alone.

- radar: mean |normalised delta| per axis, one polygon per model (the paper's figure);
- heatmap: SGS per dataset x axis, one panel per model;
- dose-response: mean |normalised delta| against strength per axis, one line per
  position; politer (+) and ruder (-) register levels side by side;
- distributions: per-prompt scores s per axis, one box per model;
- layer curves (from analysis.parquet): mean cos - 1 per layer, one panel per model and
  variant family, two lines: at the answer start (the rendered prompt's last token, the Act
  axis) and at the end of the user's own text (where the variant's words end).
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import polars as pl

from sago_core.vocabulary import AXES, BASE_FAMILY, POOLED, REPLAY_FAMILY


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(figure: Any) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    _pyplot().close(figure)
    return buffer.getvalue()


def radar(deltas: pl.DataFrame) -> bytes:
    plt = _pyplot()
    magnitude = (
        deltas.drop_nulls("delta_norm")
        .group_by("model", "axis")
        .agg(pl.col("delta_norm").abs().mean().alias("m"))
    )
    angles = np.linspace(0, 2 * np.pi, len(AXES), endpoint=False).tolist()
    figure, ax = plt.subplots(figsize=(5.5, 5.5), subplot_kw={"polar": True})
    for model in sorted(magnitude["model"].unique().to_list()):
        rows = {
            r["axis"]: r["m"]
            for r in magnitude.filter(pl.col("model") == model).iter_rows(named=True)
        }
        values = [rows.get(axis, np.nan) for axis in AXES]
        ax.plot([*angles, angles[0]], [*values, values[0]], marker="o", label=model)
        ax.fill([*angles, angles[0]], [*values, values[0]], alpha=0.12)
    ax.set_xticks(angles)
    ax.set_xticklabels(AXES)
    ax.set_title("Mean |normalised delta| per axis (0 = perfectly stable)")
    ax.legend(loc="upper right", bbox_to_anchor=(1.35, 1.1), fontsize=8)
    return _png(figure)


def heatmap(summary: pl.DataFrame) -> bytes:
    plt = _pyplot()
    models = sorted(summary["model"].unique().to_list())
    figure, axes = plt.subplots(
        1, len(models), figsize=(1.6 + 5.2 * len(models), 4.2), squeeze=False
    )
    for ax, model in zip(axes[0], models, strict=True):
        rows = summary.filter(pl.col("model") == model)
        datasets = [*sorted(d for d in rows["dataset"].unique().to_list() if d != POOLED), POOLED]
        index = {(r["dataset"], r["axis"]): r["sgs"] for r in rows.iter_rows(named=True)}
        cells = [[index.get((d, a)) for a in AXES] for d in datasets]
        grid = np.array([[np.nan if v is None else v for v in row] for row in cells], float)
        image = ax.imshow(grid, cmap="viridis", aspect="auto")
        ax.set_xticks(range(len(AXES)), AXES)
        ax.set_yticks(range(len(datasets)), datasets, fontsize=8)
        for (i, j), value in np.ndenumerate(grid):
            label = "NA" if np.isnan(value) else f"{value:.3f}"
            ax.text(j, i, label, ha="center", va="center", fontsize=7, color="white")
        ax.set_title(f"SGS — {model}", fontsize=9)
        figure.colorbar(image, ax=ax, fraction=0.046)
    return _png(figure)


def dose_response(deltas: pl.DataFrame) -> bytes:
    plt = _pyplot()
    data = deltas.drop_nulls("delta_norm").with_columns(pl.col("delta_norm").abs().alias("m"))
    panels = [
        ("register", "politer", pl.col("strength") > 0),
        ("register", "ruder", pl.col("strength") < 0),
    ]
    panels += [
        ("noise", s, pl.col("subtype") == s) for s in ("spacing", "punctuation", "capitalization")
    ]
    panels += [("structural", "length", pl.col("subtype") == "length")]
    figure, axes = plt.subplots(
        len(AXES),
        len(panels),
        figsize=(3.0 * len(panels), 2.2 * len(AXES)),
        squeeze=False,
        sharey="row",
    )
    for col, (family, title, condition) in enumerate(panels):
        chosen = data.filter((pl.col("family") == family) & condition)
        for row, axis in enumerate(AXES):
            ax = axes[row][col]
            curves = (
                chosen.filter(pl.col("axis") == axis)
                .group_by("position", pl.col("strength").abs().alias("level"))
                .agg(pl.col("m").mean())
                .sort("level")
            )
            for position in sorted(curves["position"].unique().to_list()):
                line = curves.filter(pl.col("position") == position)
                ax.plot(line["level"], line["m"], marker="o", label=position)
            if row == 0:
                ax.set_title(f"{family}: {title}", fontsize=9)
            if col == 0:
                ax.set_ylabel(axis)
            if not len(curves):
                ax.text(
                    0.5,
                    0.5,
                    "not in this run",
                    ha="center",
                    va="center",
                    transform=ax.transAxes,
                    fontsize=8,
                    color="grey",
                )
    handles, labels = axes[0][0].get_legend_handles_labels()
    if handles:
        figure.legend(handles, labels, loc="upper right")
    figure.suptitle("Dose-response: mean |normalised delta| by strength", y=1.0)
    return _png(figure)


def distributions(scores: pl.DataFrame) -> bytes:
    plt = _pyplot()
    models = sorted(scores["model"].unique().to_list())
    figure, axes = plt.subplots(1, len(AXES), figsize=(2.6 * len(AXES), 3.4), squeeze=False)
    for ax, axis in zip(axes[0], AXES, strict=True):
        chosen = scores.filter((pl.col("axis") == axis) & pl.col("s").is_not_null())
        data = [chosen.filter(pl.col("model") == m)["s"].to_numpy() for m in models]
        if any(len(d) for d in data):
            ax.boxplot([d if len(d) else [np.nan] for d in data])
            ax.set_xticks(
                range(1, len(models) + 1),
                [m.split(":")[-1][:14] for m in models],
                rotation=30,
                fontsize=7,
            )
        else:
            ax.text(0.5, 0.5, "NA", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(axis)
    figure.suptitle("Per-prompt scores s (RMS of normalised deltas)")
    return _png(figure)


CURVES = (("layer_cosines", "answer start (axis)"), ("layer_cosines_user", "end of user text"))


def _mean_curve(column: pl.Series) -> np.ndarray | None:
    """Mean over rows of cos - 1 per layer; non-finite cosines are left out."""
    lists = [c for c in column.to_list() if c is not None]
    if not lists or len({len(c) for c in lists}) != 1:
        return None
    values = np.array(lists, dtype=np.float64)
    values[~np.isfinite(values)] = np.nan
    if np.isnan(values).all():
        return None
    return np.nanmean(values, axis=0) - 1.0


def layer_curves(analysis: pl.DataFrame) -> bytes:
    """``analysis`` rows with a ``family`` column (base rows are left out)."""
    plt = _pyplot()
    rows = analysis.filter(pl.col("family") != BASE_FAMILY)
    models = sorted(rows["model"].unique().to_list())
    families = sorted(rows["family"].unique().to_list(), key=lambda f: (f == REPLAY_FAMILY, f))
    figure, axes = plt.subplots(
        max(len(models), 1),
        max(len(families), 1),
        figsize=(3.2 * max(len(families), 1), 2.6 * max(len(models), 1)),
        squeeze=False,
        sharey="row",
    )
    for i, model in enumerate(models):
        for j, family in enumerate(families):
            ax = axes[i][j]
            chosen = rows.filter((pl.col("model") == model) & (pl.col("family") == family))
            drawn = 0
            for column, label in CURVES:
                curve = _mean_curve(chosen[column]) if column in chosen.columns else None
                if curve is not None:
                    ax.plot(range(1, len(curve) + 1), curve, marker=".", label=label)
                    drawn += 1
            if not drawn:
                ax.text(
                    0.5,
                    0.5,
                    "no hidden states",
                    ha="center",
                    va="center",
                    transform=ax.transAxes,
                    fontsize=8,
                    color="grey",
                )
            ax.axhline(0.0, color="grey", linewidth=0.5)
            ax.xaxis.get_major_locator().set_params(integer=True)
            title = f"{REPLAY_FAMILY} (floor)" if family == REPLAY_FAMILY else family
            ax.set_title(f"{title} — {model.split(':')[-1][:18]}", fontsize=8)
            if i == len(models) - 1:
                ax.set_xlabel("layer")
            if j == 0:
                ax.set_ylabel("mean cos - 1")
    legend: dict[str, Any] = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            legend.setdefault(label, handle)
    if legend:
        figure.legend(
            list(legend.values()),
            list(legend),
            loc="upper center",
            bbox_to_anchor=(0.5, -0.04),
            ncol=len(legend),
            fontsize=8,
        )
    figure.suptitle("Where Act is read: per-layer cosine to the base, two positions", y=1.02)
    return _png(figure)
