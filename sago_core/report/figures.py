"""The report's figures as PNG bytes (matplotlib, headless Agg backend), from artifacts alone.

- radar: mean |normalised delta| per axis, one polygon per model (the paper's figure);
- heatmap: SGS per dataset x axis, one panel per model, one shared colour scale; each cell's
  number is dark on light cells and white on dark ones (picked by the cell's luminance);
- dose-response: mean |normalised delta| against strength per axis, one line per
  position; politer (+) and ruder (-) register levels side by side; only the panels the run
  has are drawn (the figure names those left out), a single strength is one labelled point;
- distributions: per-prompt scores s per axis, one horizontal box per model;
- layer curves (from analysis.parquet): mean cos - 1 per layer, one panel per model and
  variant family, two lines: at the answer start (the rendered prompt's last token, the Act
  axis) and at the end of the user's own text (where the variant's words end).

Each public function returns PNG bytes; its ``_draw_*`` twin returns the matplotlib Figure
(the tests check text placement and colours on it). Figures are sized for the report's page
(1200 px at 110 dpi: about 11 inches) and laid out by matplotlib's constrained layout, so the
save needs no ``bbox_inches="tight"`` (one draw per figure, not two).
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from sago_core.vocabulary import AXES, BASE_FAMILY, POOLED, REPLAY_FAMILY

DPI = 110
PAGE_WIDTH_IN = 10.9  # the report's 1200 px column at DPI: a wider figure is scaled down
DARK_TEXT = "#1a1a1a"
LIGHT_TEXT = "white"


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(figure: Any) -> bytes:
    """PNG bytes of ``figure``, closed afterwards. A figure with a layout engine is saved as
    laid out (one draw); one without is cropped to its content (``bbox_inches="tight"``)."""
    buffer = io.BytesIO()
    if figure.get_layout_engine() is None:
        figure.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    else:
        figure.savefig(buffer, format="png", dpi=DPI)
    _pyplot().close(figure)
    return buffer.getvalue()


def legend_below(figure: Any, legend: dict[str, Any], **options: Any) -> None:
    """One legend for every panel of ``figure`` (label -> handle), under the panels."""
    if legend:
        style = {"loc": "outside lower center", "ncol": len(legend), "fontsize": 8}
        figure.legend(list(legend.values()), list(legend), **(style | options))


def empty_panel(ax: Any, note: str) -> None:
    """A grey note in the middle of a panel with nothing to draw."""
    ax.text(
        0.5, 0.5, note, ha="center", va="center", transform=ax.transAxes, fontsize=8, color="grey"
    )


def short_labels(models: Sequence[str], width: int = 22) -> list[str]:
    """Short distinct names for ``models``: the fewest trailing path parts of each id (after
    its ``backend:`` prefix) that tell them apart, cut to ``width`` characters from the left."""
    parts = [m.split(":", 1)[-1].rstrip("/").split("/") for m in models]
    longest = max((len(p) for p in parts), default=1)
    labels = [m for m in models]
    for keep in range(1, longest + 1):
        labels = ["/".join(p[-keep:]) for p in parts]
        if len(set(labels)) == len(labels):
            break
    cut = [label if len(label) <= width else "…" + label[-(width - 1) :] for label in labels]
    return cut if len(set(cut)) == len(cut) else [f"{i + 1}: {c}" for i, c in enumerate(cut)]


def text_colour(rgba: Sequence[float]) -> str:
    """Dark text on a light background, white on a dark one, by the background's relative
    luminance (WCAG 2: sRGB channels linearised; 0.179 is where both contrasts are equal)."""

    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(float(c)) for c in rgba[:3])
    luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b
    return DARK_TEXT if luminance > 0.179 else LIGHT_TEXT


def _draw_radar(deltas: pl.DataFrame) -> Any:
    plt = _pyplot()
    magnitude = (
        deltas.drop_nulls("delta_norm")
        .group_by("model", "axis")
        .agg(pl.col("delta_norm").abs().mean().alias("m"))
    )
    models = sorted(magnitude["model"].unique().to_list())
    angles = np.linspace(0, 2 * np.pi, len(AXES), endpoint=False).tolist()
    figure, ax = plt.subplots(
        figsize=(6.4, 6.4 + 0.18 * math.ceil(len(models) / 3)),
        subplot_kw={"polar": True},
        layout="constrained",
    )
    for model, label in zip(models, short_labels(models), strict=True):
        rows = {
            r["axis"]: r["m"]
            for r in magnitude.filter(pl.col("model") == model).iter_rows(named=True)
        }
        values = [rows.get(axis, np.nan) for axis in AXES]
        ax.plot([*angles, angles[0]], [*values, values[0]], marker="o", label=label)
        ax.fill([*angles, angles[0]], [*values, values[0]], alpha=0.12)
    ax.set_xticks(angles)
    ax.set_xticklabels(AXES)
    ax.yaxis.set_major_locator(_max_n(4))
    ax.set_rlabel_position(90 + 180 / max(len(AXES), 1))
    ax.set_title("Mean |normalised delta| per axis (0 = perfectly stable)", pad=18, fontsize=10)
    if models:
        figure.legend(loc="outside lower center", ncol=min(3, len(models)), fontsize=8)
    return figure


def radar(deltas: pl.DataFrame) -> bytes:
    return _png(_draw_radar(deltas))


def _max_n(n: int) -> Any:
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(n)


def _grid(count: int, columns: int) -> tuple[int, int]:
    ncols = max(1, min(columns, count))
    return max(1, math.ceil(count / ncols)), ncols


def _draw_heatmap(summary: pl.DataFrame) -> Any:
    plt = _pyplot()
    from matplotlib.colors import Normalize

    models = sorted(summary["model"].unique().to_list())
    labels = short_labels(models)
    grids: list[tuple[list[str], np.ndarray]] = []
    for model in models:
        rows = summary.filter(pl.col("model") == model)
        datasets = [*sorted(d for d in rows["dataset"].unique().to_list() if d != POOLED), POOLED]
        index = {(r["dataset"], r["axis"]): r["sgs"] for r in rows.iter_rows(named=True)}
        grid = np.array(
            [
                [np.nan if index.get((d, a)) is None else index[(d, a)] for a in AXES]
                for d in datasets
            ],
            float,
        )
        grids.append((datasets, grid))
    finite = np.concatenate([g[np.isfinite(g)] for _, g in grids]) if grids else np.array([])
    low, high = (float(finite.min()), float(finite.max())) if len(finite) else (0.0, 1.0)
    norm = Normalize(vmin=low, vmax=high if high > low else low + 1.0)
    nrows, ncols = _grid(len(models), 2)
    tallest = max((len(d) for d, _ in grids), default=1)
    figure, axes = plt.subplots(
        nrows,
        ncols,
        figsize=(PAGE_WIDTH_IN if ncols > 1 else 6.4, nrows * (1.2 + 0.42 * tallest) + 0.4),
        squeeze=False,
        layout="constrained",
    )
    cmap = plt.get_cmap("viridis")
    image = None
    for ax, label, (datasets, grid) in zip(axes.flat, labels, grids, strict=False):
        image = ax.imshow(grid, cmap=cmap, norm=norm, aspect="auto")
        ax.set_xticks(range(len(AXES)), AXES, fontsize=8)
        ax.set_yticks(range(len(datasets)), datasets, fontsize=8)
        for (i, j), value in np.ndenumerate(grid):
            if np.isnan(value):
                ax.text(
                    j,
                    i,
                    "NA",
                    ha="center",
                    va="center",
                    fontsize=7,
                    in_layout=False,
                    color=DARK_TEXT,
                )
            else:
                colour = text_colour(cmap(norm(value)))
                ax.text(
                    j,
                    i,
                    f"{value:.3f}",
                    ha="center",
                    va="center",
                    fontsize=7,
                    in_layout=False,
                    color=colour,
                )
        ax.set_title(f"SGS — {label}", fontsize=9)
    for ax in list(axes.flat)[len(models) :]:
        ax.remove()
    if image is not None:
        figure.colorbar(
            image, ax=[a for a in axes.flat if a.figure is figure], shrink=0.9, label="SGS"
        )
    return figure


def heatmap(summary: pl.DataFrame) -> bytes:
    return _png(_draw_heatmap(summary))


DOSE_PANELS: tuple[tuple[str, str, str], ...] = (
    ("register", "politer", "level"),
    ("register", "ruder", "level"),
    ("noise", "spacing", "strength"),
    ("noise", "punctuation", "strength"),
    ("noise", "capitalization", "strength"),
    ("structural", "length", "strength"),
)


CHARS_PER_INCH = 12  # a 10 pt title line: about 12 characters per inch of figure


def _wrap(lead: str, items: list[str], width_in: float) -> str:
    """``lead`` then ``items`` (comma-separated, never split inside one) in lines that fit a
    figure ``width_in`` inches wide (at 10 pt)."""
    limit = max(20, int(width_in * CHARS_PER_INCH))
    lines = [lead]
    for i, item in enumerate(items):
        piece = item + ("," if i < len(items) - 1 else "")
        if len(lines[-1]) + 1 + len(piece) > limit and lines[-1] != lead:
            lines.append(piece)
        else:
            lines[-1] += " " + piece
    return "\n".join(lines)


def _dose_condition(family: str, title: str) -> pl.Expr:
    if family == "register":
        return pl.col("strength") > 0 if title == "politer" else pl.col("strength") < 0
    return pl.col("subtype") == title


def _draw_dose_response(deltas: pl.DataFrame) -> Any:
    plt = _pyplot()
    data = deltas.drop_nulls("delta_norm").with_columns(pl.col("delta_norm").abs().alias("m"))
    present: list[tuple[str, str, str, pl.DataFrame]] = []
    left_out: list[str] = []
    for family, title, xlabel in DOSE_PANELS:
        chosen = data.filter((pl.col("family") == family) & _dose_condition(family, title))
        if len(chosen):
            present.append((family, title, xlabel, chosen))
        else:
            left_out.append(f"{family}: {title}")
    ncols = len(present)
    width = min(PAGE_WIDTH_IN, 1.2 + 1.9 * ncols) if present else 6.4
    heading = "Dose-response: mean |normalised delta| by strength"
    if left_out:
        heading += "\n" + _wrap("not in this run (not drawn):", left_out, width)
    if not present:
        figure = plt.figure(figsize=(width, 1.6), layout="constrained")
        figure.suptitle(heading, fontsize=10)
        return figure
    figure, axes = plt.subplots(
        len(AXES),
        ncols,
        figsize=(width, 1.0 + 1.45 * len(AXES) + 0.15 * heading.count("\n")),
        squeeze=False,
        sharex="col",
        sharey="row",
        layout="constrained",
    )
    positions = sorted(data["position"].unique().to_list())
    colours = {p: f"C{i % 10}" for i, p in enumerate(positions)}
    legend: dict[str, Any] = {}
    for col, (family, title, xlabel, chosen) in enumerate(present):
        levels = sorted(set(chosen["strength"].abs().to_list()))
        single = len(levels) == 1
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
                (handle,) = ax.plot(
                    line["level"], line["m"], marker="o", color=colours[position], label=position
                )
                legend.setdefault(position, handle)
                if single:
                    ax.annotate(
                        f"{line['m'][0]:.3g}",
                        (line["level"][0], line["m"][0]),
                        textcoords="offset points",
                        xytext=(5, 3),
                        fontsize=7,
                        in_layout=False,
                    )
            if not len(curves):
                empty_panel(ax, "NA")
            ax.yaxis.set_major_locator(_max_n(4))
            ax.margins(y=0.2)
            ax.tick_params(labelsize=7)
            if row == 0:
                note = f" (one {xlabel})" if single else ""
                ax.set_title(f"{family}: {title}{note}", fontsize=8)
            if col == 0:
                ax.set_ylabel(axis, fontsize=9)
            if row == len(AXES) - 1:
                ax.set_xlabel(xlabel, fontsize=8)
        bottom = axes[len(AXES) - 1][col]
        if len(levels) <= 4:
            bottom.set_xticks(levels, [f"{v:g}" for v in levels])
        else:
            bottom.xaxis.set_major_locator(_max_n(4))
        if single:
            pad = max(abs(levels[0]) * 0.5, 0.5)
            bottom.set_xlim(levels[0] - pad, levels[0] + pad)
    legend_below(figure, legend, title="position", title_fontsize=8)
    figure.suptitle(heading, fontsize=10)
    return figure


def dose_response(deltas: pl.DataFrame) -> bytes:
    return _png(_draw_dose_response(deltas))


def _draw_distributions(scores: pl.DataFrame) -> Any:
    plt = _pyplot()
    models = sorted(scores["model"].unique().to_list())
    labels = short_labels(models)
    nrows, ncols = _grid(len(AXES), 3)
    figure, axes = plt.subplots(
        nrows,
        ncols,
        figsize=(PAGE_WIDTH_IN, nrows * (1.1 + 0.24 * max(len(models), 1)) + 0.4),
        squeeze=False,
        sharey=True,
        layout="constrained",
    )
    for ax, axis in zip(axes.flat, AXES, strict=False):
        chosen = scores.filter((pl.col("axis") == axis) & pl.col("s").is_not_null())
        data = [chosen.filter(pl.col("model") == m)["s"].to_numpy() for m in models]
        if any(len(d) for d in data):
            ax.boxplot(
                [d if len(d) else [np.nan] for d in data],
                orientation="horizontal",
                widths=0.6,
                flierprops={"markersize": 3},
            )
        else:
            ax.text(0.5, 0.5, "NA", ha="center", va="center", transform=ax.transAxes)
        ax.set_yticks(range(1, len(models) + 1), labels, fontsize=8)
        ax.set_ylim(len(models) + 0.5, 0.5)
        ax.xaxis.set_major_locator(_max_n(4))
        ax.tick_params(axis="x", labelsize=8)
        ax.set_xlabel("s", fontsize=8)
        ax.set_title(axis, fontsize=10)
    for ax in list(axes.flat)[len(AXES) :]:
        ax.remove()
    figure.suptitle("Per-prompt scores s (RMS of normalised deltas)", fontsize=11)
    return figure


def distributions(scores: pl.DataFrame) -> bytes:
    return _png(_draw_distributions(scores))


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


def _draw_layer_curves(analysis: pl.DataFrame) -> Any:
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator

    rows = analysis.filter(pl.col("family") != BASE_FAMILY)
    models = sorted(rows["model"].unique().to_list())
    labels = short_labels(models, width=18)
    families = sorted(rows["family"].unique().to_list(), key=lambda f: (f == REPLAY_FAMILY, f))
    nrows, ncols = max(len(models), 1), max(len(families), 1)
    figure, axes = plt.subplots(
        nrows,
        ncols,
        figsize=(min(PAGE_WIDTH_IN, 0.6 + 3.0 * ncols), 0.9 + 2.3 * nrows),
        squeeze=False,
        sharey="row",
        layout="constrained",
    )
    legend: dict[str, Any] = {}
    for i, (model, short) in enumerate(zip(models, labels, strict=True)):
        for j, family in enumerate(families):
            ax = axes[i][j]
            chosen = rows.filter((pl.col("model") == model) & (pl.col("family") == family))
            drawn = 0
            for column, label in CURVES:
                curve = _mean_curve(chosen[column]) if column in chosen.columns else None
                if curve is not None:
                    (handle,) = ax.plot(range(1, len(curve) + 1), curve, marker=".", label=label)
                    legend.setdefault(label, handle)
                    drawn += 1
            if not drawn:
                empty_panel(ax, "no hidden states")
            ax.axhline(0.0, color="grey", linewidth=0.5)
            ax.xaxis.set_major_locator(MaxNLocator(5, integer=True))
            ax.yaxis.set_major_locator(MaxNLocator(4))
            ax.tick_params(labelsize=7)
            title = f"{REPLAY_FAMILY} (floor)" if family == REPLAY_FAMILY else family
            ax.set_title(f"{title} — {short}", fontsize=8)
            ax.set_xlabel("layer", fontsize=8)
            ax.set_ylabel("mean cos - 1", fontsize=8)
    legend_below(figure, legend)
    figure.suptitle("Where Act is read: per-layer cosine to the base, two positions", fontsize=10)
    return figure


def layer_curves(analysis: pl.DataFrame) -> bytes:
    """``analysis`` rows with a ``family`` column (base rows are left out)."""
    return _png(_draw_layer_curves(analysis))
