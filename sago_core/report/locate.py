"""The report's "where the instability sits" section (issue 17), from artifacts alone:

- layer profiles (layer_profiles.parquet): mean 1 - cos per layer with its bootstrap band,
  one curve per variant family (pooled over subtypes and strengths), at both read
  positions, the onset layer marked; a second figure splits each family by subtype and
  strength (at the answer start, the Act axis' position);
- activation patching (patching.parquet): mean recovery of the Prob delta by patched
  layer, one curve per family with a bootstrap band (variants resampled), and beside it the
  mean KL of the first answer token's distribution to the base's.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from sago_core.artifacts.layout import LAYER_PROFILES_FILE, PATCHING_FILE
from sago_core.report.figures import _png, _pyplot
from sago_core.statistics.intervals import bootstrap_mean_ci
from sago_core.statistics.layer_profiles import ONSET_FRACTION, READ_POSITIONS
from sago_core.vocabulary import POOLED, REPLAY_FAMILY

POSITION_TITLES = {
    "generation_start": "answer start (the Act axis)",
    "prompt_end": "end of the user's text",
}
BAND_SEED = 0


@dataclass(frozen=True)
class Located:
    profiles: pl.DataFrame | None
    patching: pl.DataFrame | None


def read_located(profiles_path: str | None, patching_path: str | None) -> Located:
    def read(path: str | None) -> pl.DataFrame | None:
        return pl.read_parquet(path) if path and Path(path).exists() else None

    return Located(read(profiles_path), read(patching_path))


def located_from_run(run_dir: Path) -> Located | None:
    """The section's artifacts of a finished run: only a run with patching on shows it."""
    if not (run_dir / PATCHING_FILE).exists():
        return None
    return read_located(str(run_dir / LAYER_PROFILES_FILE), str(run_dir / PATCHING_FILE))


def _short(model: str) -> str:
    return model.split(":")[-1][:18]


def _families(frame: pl.DataFrame) -> list[str]:
    return sorted(frame["family"].unique().to_list(), key=lambda f: (f == REPLAY_FAMILY, f))


def _draw_profile(ax: Any, rows: pl.DataFrame, label: str, color: Any = None) -> None:
    rows = rows.sort("layer")
    line = ax.plot(rows["layer"], rows["mean_one_minus_cos"], marker=".", label=label, color=color)
    if rows["ci_low"].null_count() < rows.height:
        ax.fill_between(
            rows["layer"].to_numpy(),
            rows["ci_low"].fill_null(np.nan).to_numpy(),
            rows["ci_high"].fill_null(np.nan).to_numpy(),
            alpha=0.18,
            color=line[0].get_color(),
        )
    onset = rows["onset_layer"].drop_nulls()
    if len(onset):
        ax.axvline(int(onset[0]), color=line[0].get_color(), linestyle=":", linewidth=1)


def _legend_below(figure: Any, axes: Any) -> None:
    legend: dict[str, Any] = {}
    for ax in np.ravel(axes):
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            legend.setdefault(label, handle)
    if legend:
        figure.legend(
            list(legend.values()),
            list(legend),
            loc="upper center",
            bbox_to_anchor=(0.5, -0.02),
            ncol=min(len(legend), 6),
            fontsize=7,
        )


def profile_figure(profiles: pl.DataFrame) -> bytes:
    """Per model (rows) and read position (columns): one curve per family, band and onset."""
    plt = _pyplot()
    pooled = profiles.filter(pl.col("subtype") == POOLED)
    models = sorted(pooled["model"].unique().to_list())
    positions = [p for p in READ_POSITIONS if p in set(pooled["read_position"])]
    figure, axes = plt.subplots(
        max(len(models), 1),
        max(len(positions), 1),
        figsize=(5.0 * max(len(positions), 1), 3.0 * max(len(models), 1)),
        squeeze=False,
    )
    for i, model in enumerate(models):
        for j, position in enumerate(positions):
            ax = axes[i][j]
            chosen = pooled.filter(
                (pl.col("model") == model) & (pl.col("read_position") == position)
            )
            for family in _families(chosen):
                _draw_profile(ax, chosen.filter(pl.col("family") == family), family)
            ax.set_title(f"{POSITION_TITLES[position]} — {_short(model)}", fontsize=8)
            ax.set_xlabel("layer")
            ax.set_ylabel("mean 1 - cos")
            ax.xaxis.get_major_locator().set_params(integer=True)
    _legend_below(figure, axes)
    figure.suptitle(
        f"Layer profiles per family (band: 95% bootstrap; dotted: onset, first layer at "
        f"{ONSET_FRACTION:.0%} of the maximum)",
        y=1.02,
        fontsize=9,
    )
    return _png(figure)


def strength_figure(profiles: pl.DataFrame) -> bytes:
    """Per model (rows) and family (columns), at the answer start: one curve per subtype and
    strength, band and onset."""
    plt = _pyplot()
    rows = profiles.filter(
        (pl.col("subtype") != POOLED) & (pl.col("read_position") == "generation_start")
    )
    models = sorted(rows["model"].unique().to_list())
    families = _families(rows)
    figure, axes = plt.subplots(
        max(len(models), 1),
        max(len(families), 1),
        figsize=(3.6 * max(len(families), 1), 2.9 * max(len(models), 1)),
        squeeze=False,
        sharey="row",
    )
    for i, model in enumerate(models):
        for j, family in enumerate(families):
            ax = axes[i][j]
            chosen = rows.filter((pl.col("model") == model) & (pl.col("family") == family))
            groups = chosen.select("subtype", "strength").unique().sort("subtype", "strength")
            for subtype, strength in groups.iter_rows():
                label = subtype if strength is None else f"{subtype} {strength:g}"
                curve = chosen.filter(
                    (pl.col("subtype") == subtype)
                    & (
                        pl.col("strength").is_null()
                        if strength is None
                        else pl.col("strength") == strength
                    )
                )
                _draw_profile(ax, curve, label)
            ax.set_title(f"{family} — {_short(model)}", fontsize=8)
            ax.set_xlabel("layer")
            if j == 0:
                ax.set_ylabel("mean 1 - cos")
            ax.legend(fontsize=6)
    figure.suptitle("Layer profiles per subtype and strength (answer start)", y=1.02, fontsize=9)
    return _png(figure)


def _mean_band(values: np.ndarray) -> tuple[float, float, float]:
    low, high = bootstrap_mean_ci(values, BAND_SEED)
    mean = float(np.mean(values))
    return mean, np.nan if low is None else low, np.nan if high is None else high


def _curves(frame: pl.DataFrame, column: str) -> dict[str, tuple[list[int], np.ndarray]]:
    """Per family: layers and (mean, low, high) per layer over the rows with a value."""
    out: dict[str, tuple[list[int], np.ndarray]] = {}
    for family in _families(frame):
        chosen = frame.filter((pl.col("family") == family) & pl.col(column).is_not_null())
        layers = sorted(chosen["layer"].unique().to_list())
        if not layers:
            continue
        stats = [
            _mean_band(chosen.filter(pl.col("layer") == layer)[column].to_numpy())
            for layer in layers
        ]
        out[family] = (layers, np.array(stats))
    return out


def recovery_figure(patching: pl.DataFrame) -> bytes:
    """Per model (rows): mean recovery by layer per family with bands, and the mean KL of
    the first answer token to the base's."""
    plt = _pyplot()
    rows = patching.filter(pl.col("layer").is_not_null())
    models = sorted(rows["model"].unique().to_list())
    panels = (("recovery", "mean recovery of the Prob delta"), ("kl_first_token", "mean KL"))
    figure, axes = plt.subplots(
        max(len(models), 1), 2, figsize=(10.0, 3.0 * max(len(models), 1)), squeeze=False
    )
    for i, model in enumerate(models):
        chosen = rows.filter(pl.col("model") == model)
        for j, (column, label) in enumerate(panels):
            ax = axes[i][j]
            for family, (layers, stats) in _curves(chosen, column).items():
                n = (
                    chosen.filter(pl.col("family") == family)
                    .select("dataset", "prompt_id", "variant_id")
                    .n_unique()
                )
                line = ax.plot(layers, stats[:, 0], marker=".", label=f"{family} ({n} variants)")
                ax.fill_between(
                    layers, stats[:, 1], stats[:, 2], alpha=0.18, color=line[0].get_color()
                )
            if column == "recovery":
                ax.axhline(0.0, color="grey", linewidth=0.5)
                ax.axhline(1.0, color="grey", linewidth=0.5, linestyle="--")
            ax.set_title(f"{label} — {_short(model)}", fontsize=8)
            ax.set_xlabel("patched layer (base state at the last prompt token)")
            ax.xaxis.get_major_locator().set_params(integer=True)
    _legend_below(figure, axes)
    figure.suptitle(
        "Activation patching: recovery = (logp_patched - logp_variant) / (logp_base - "
        "logp_variant); KL of the first answer token to the base's",
        y=1.02,
        fontsize=9,
    )
    return _png(figure)


def _onset_table(profiles: pl.DataFrame) -> str:
    rows = (
        profiles.filter(pl.col("subtype") == POOLED)
        .group_by("model", "family", "read_position")
        .agg(pl.col("onset_layer").first(), pl.col("n").first(), pl.col("layer").max())
        .sort("model", "family", "read_position")
    )
    body = "".join(
        "<tr>"
        + "".join(
            f"<td>{html.escape(str(v))}</td>"
            for v in (
                r["model"],
                r["family"],
                r["read_position"],
                "NA" if r["onset_layer"] is None else f"{r['onset_layer']} / {r['layer']}",
                r["n"],
            )
        )
        + "</tr>"
        for r in rows.iter_rows(named=True)
    )
    return (
        "<table><tr><th>model</th><th>family</th><th>read at</th><th>onset layer</th>"
        f"<th>variants</th></tr>{body}</table>"
    )


def _image(name: str, png: bytes) -> str:
    data = base64.b64encode(png).decode()
    return f'<img id="fig-{name}" alt="{name}" src="data:image/png;base64,{data}">'


def locate_sections(located: Located | None) -> list[str]:
    """The section's HTML blocks; nothing when the run has neither artifact."""
    if located is None or (located.profiles is None and located.patching is None):
        return []
    parts = ["<h2>Where the instability sits (layer profiles, activation patching)</h2>"]
    profiles = located.profiles
    if profiles is not None and profiles.height:
        parts += [
            "<p>Mean over variants of 1 - cos(h_l(variant), h_l(base)) per layer l, with a 95% "
            "bootstrap band (variants resampled). Onset: the first layer whose profile reaches "
            f"{ONSET_FRACTION:.0%} of its maximum.</p>",
            _onset_table(profiles),
            _image("layer-profiles", profile_figure(profiles)),
            _image("layer-profiles-strength", strength_figure(profiles)),
        ]
    elif profiles is not None:
        parts.append("<p>No hidden states in this run: no layer profiles.</p>")
    patching = located.patching
    if patching is not None and patching["recovery"].drop_nulls().len():
        missing = patching.filter(pl.col("missing_reason").is_not_null())
        note = (
            f" {missing.height} of {patching.height} rows have no recovery or KL "
            "(reasons in patching.parquet)."
            if missing.height
            else ""
        )
        parts += [
            "<p>Each sampled variant run once per layer l with layer l's output at the last "
            "prompt token replaced by the base prompt's: the share of the change in log "
            "p(base answer) it restores (1: all of it) and the KL of the first answer "
            f"token's distribution to the base's (0 at the last layer by construction).{note}"
            "</p>",
            _image("patching-recovery", recovery_figure(patching)),
        ]
    elif patching is not None:
        reasons = sorted(set(patching["missing_reason"].drop_nulls().to_list()))
        parts.append(
            "<p>Activation patching gave no recovery: "
            + html.escape("; ".join(reasons) or "no variant to patch")
            + "</p>"
        )
    return parts
