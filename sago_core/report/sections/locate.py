"""The report's "where the instability sits" section, from artifacts alone:

- layer profiles (layer_profiles.parquet): mean 1 - cos per layer with its bootstrap band,
  one curve per variant family (pooled over subtypes and strengths), at both read
  positions, the onset layer marked; a second figure splits each family by subtype and
  strength (at the answer start, the Act axis' position);
- activation patching (patching.parquet): by patched layer, one curve per family, the
  recovery of the Prob delta as a ratio of sums (the share of the family's total change in
  log p(base answer) restored; ``statistics/recovery.py``) with its bootstrap band over
  prompts and, dashed, the median recovery; beside it the mean KL of the first answer
  token's distribution to the base's (band over prompts). A table gives, per family, the
  layer where the ratio of sums peaks, with both figures and their bands. Per-variant
  recoveries are never averaged: they stay in patching.parquet with their gap.

Every band is drawn only from at least ``intervals.MIN_PROMPTS`` prompts; the text and the
table say when it is not.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from sago_core.artifacts.layout import LAYER_PROFILES_FILE, PATCHING_FILE
from sago_core.report.figures import _png, _pyplot, legend_below
from sago_core.report.markup import image as _image
from sago_core.report.markup import plain_table
from sago_core.statistics.intervals import MIN_PROMPTS, stable_seed
from sago_core.statistics.layer_profiles import ONSET_FRACTION, READ_POSITIONS, profile_band
from sago_core.statistics.recovery import (
    MIN_RELATIVE_GAP,
    SCALE_FLOOR_NATS,
    recovery_by_layer,
)
from sago_core.statistics.tails import ALL_FAMILIES
from sago_core.vocabulary import POOLED, REPLAY_FAMILY

POSITION_TITLES = {
    "generation_start": "answer start (the Act axis)",
    "prompt_end": "end of the user's text",
}


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
    legend_below(
        figure,
        legend,
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
            chosen = pooled.filter(model=model, read_position=position)
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


def _kl_curve(frame: pl.DataFrame, model: str) -> tuple[list[int], np.ndarray]:
    """Layers and (mean, low, high) of the first-token KL, band over prompts (NaN when
    there are too few prompts)."""
    rows = frame.filter(pl.col("kl_first_token").is_not_null())
    layers = sorted(rows["layer"].unique().to_list())
    stats = []
    for layer in layers:
        chosen = rows.filter(pl.col("layer") == layer).sort("dataset", "prompt_id")
        keys = chosen.select("dataset", "prompt_id")
        order = keys.unique().sort("dataset", "prompt_id")
        index = {k: i for i, k in enumerate(order.iter_rows())}
        owner = np.array([index[k] for k in keys.iter_rows()])
        seed = stable_seed(model, "kl", str(layer)) >> 1
        values = chosen["kl_first_token"].to_numpy()[:, None]
        # a mean over variants, whatever their dataset: prompts drawn in one stratum
        mean, low, high = profile_band(values, owner, seed)
        stats.append(
            (
                float(mean[0]),
                np.nan if low is None else float(low[0]),
                np.nan if high is None else float(high[0]),
            )
        )
    return layers, np.array(stats)


def _band(ax: Any, x: Any, low: Any, high: Any, color: Any) -> None:
    low, high = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
    if np.isfinite(low).any():
        ax.fill_between(x, low, high, alpha=0.18, color=color)


def recovery_figure(patching: pl.DataFrame, by_layer: pl.DataFrame | None = None) -> bytes:
    """Per model (rows): by layer per family, the recovery's ratio of sums with its band
    and the median (dashed); and the mean KL of the first answer token to the base's."""
    plt = _pyplot()
    rows = patching.filter(pl.col("layer").is_not_null())
    summary = by_layer if by_layer is not None else recovery_by_layer(rows)
    models = sorted(rows["model"].unique().to_list())
    figure, axes = plt.subplots(
        max(len(models), 1), 2, figsize=(10.0, 3.0 * max(len(models), 1)), squeeze=False
    )
    for i, model in enumerate(models):
        chosen = rows.filter(pl.col("model") == model)
        ax = axes[i][0]
        for family in _families(chosen):
            curve = summary.filter(
                (pl.col("model") == model)
                & (pl.col("family") == family)
                & pl.col("ratio_of_sums").is_not_null()
            ).sort("layer")
            if not curve.height:
                continue
            n = int(curve["n_variants"].to_numpy().max())
            layers = curve["layer"].to_list()
            line = ax.plot(
                layers, curve["ratio_of_sums"], marker=".", label=f"{family} ({n} variants)"
            )
            color = line[0].get_color()
            _band(
                ax,
                layers,
                curve["ci_low"].fill_null(np.nan),
                curve["ci_high"].fill_null(np.nan),
                color,
            )
            ax.plot(layers, curve["median"], linestyle="--", linewidth=1, color=color)
        ax.axhline(0.0, color="grey", linewidth=0.5)
        ax.axhline(1.0, color="grey", linewidth=0.5, linestyle="--")
        ax.set_title(f"recovery: ratio of sums (dashed: median) — {_short(model)}", fontsize=8)
        ax.set_xlabel("patched layer (base state at the last prompt token)")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax = axes[i][1]
        for family in _families(chosen):
            layers, stats = _kl_curve(chosen.filter(pl.col("family") == family), model)
            if not layers:
                continue
            line = ax.plot(layers, stats[:, 0], marker=".", label=f"{family} KL")
            _band(ax, layers, stats[:, 1], stats[:, 2], line[0].get_color())
        ax.set_title(f"mean KL of the first answer token — {_short(model)}", fontsize=8)
        ax.set_xlabel("patched layer (base state at the last prompt token)")
        ax.xaxis.get_major_locator().set_params(integer=True)
    _legend_below(figure, axes)
    figure.suptitle(
        "Activation patching: recovery = sum over variants of the change restored / sum of "
        "|logp_base - logp_variant| (band: 95% bootstrap over prompts); KL of the first "
        "answer token to the base's",
        y=1.02,
        fontsize=9,
    )
    return _png(figure)


def _interval(low: Any, high: Any, reason: Any) -> str:
    if low is None or high is None:
        return f"NA ({html.escape(str(reason))})" if reason else "NA"
    return f"[{low:.3f}, {high:.3f}]"


def _recovery_table(by_layer: pl.DataFrame) -> str:
    """Per model and family (all families last): the layer where the ratio of sums peaks,
    with its band, the median there with its band, and the counts."""
    rows = []
    measured = by_layer.filter(pl.col("ratio_of_sums").is_not_null())
    for (model, family), frame in measured.group_by(["model", "family"], maintain_order=True):
        peak = frame.sort("ratio_of_sums", "layer", descending=[True, False]).row(0, named=True)
        rows.append((str(model), str(family), int(frame["layer"].to_numpy().max()), peak))
    rows.sort(key=lambda r: (r[0], r[1] == ALL_FAMILIES, r[1]))
    headers = ["model", "family", "peak layer", "ratio of sums", "95% band", "median"]
    headers += ["95% band", "variants / prompts", "no recovery"]
    cells = [
        [
            html.escape(model),
            html.escape("all families" if family == ALL_FAMILIES else family),
            f"{peak['layer']} / {last}",
            f"{peak['ratio_of_sums']:.3f}",
            _interval(peak["ci_low"], peak["ci_high"], peak["ci_missing_reason"]),
            f"{peak['median']:.3f}",
            _interval(peak["median_ci_low"], peak["median_ci_high"], peak["ci_missing_reason"]),
            f"{peak['n_variants']} / {peak['n_prompts']}",
            str(peak["n_left_out"]),
        ]
        for model, family, last, peak in rows
    ]
    return plain_table(headers, cells)


def _layer_ranges(layers: list[int]) -> str:
    """1, 2, 3, 5 -> "1-3, 5"."""
    spans: list[list[int]] = []
    for layer in sorted(layers):
        if spans and layer == spans[-1][1] + 1:
            spans[-1][1] = layer
        else:
            spans.append([layer, layer])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def _missing_recoveries(by_layer: pl.DataFrame) -> str:
    """Per model and family, the layers without a recovery (no ratio of sums, no median, no
    band) and why (``recovery_by_layer``'s missing_reason)."""
    missing = by_layer.filter(pl.col("ratio_of_sums").is_null())
    if not missing.height:
        return ""
    reason = pl.col("missing_reason").fill_null("no defined recovery")
    groups = missing.with_columns(reason).group_by("model", "family", "missing_reason")
    items = sorted(
        (str(model), family == ALL_FAMILIES, str(family), str(why), frame["layer"].to_list())
        for (model, family, why), frame in groups
    )
    body = "".join(
        f"<li>{html.escape(model)}, "
        f"{html.escape('all families' if every else family)}: layer(s) "
        f"{_layer_ranges(layers)}: NA ({html.escape(why)})</li>"
        for model, every, family, why, layers in items
    )
    return f"<p>Layers without a recovery (no ratio of sums, median or band):</p><ul>{body}</ul>"


def _onset_table(profiles: pl.DataFrame) -> str:
    rows = (
        profiles.filter(pl.col("subtype") == POOLED)
        .group_by("model", "family", "read_position")
        .agg(pl.col("onset_layer").first(), pl.col("n").first(), pl.col("layer").max())
        .sort("model", "family", "read_position")
    )
    cells = [
        [
            html.escape(str(v))
            for v in (
                r["model"],
                r["family"],
                r["read_position"],
                "NA" if r["onset_layer"] is None else f"{r['onset_layer']} / {r['layer']}",
                r["n"],
            )
        ]
        for r in rows.iter_rows(named=True)
    ]
    return plain_table(["model", "family", "read at", "onset layer", "variants"], cells)


def locate_sections(located: Located | None) -> list[str]:
    """The section's HTML blocks; nothing when the run has neither artifact."""
    if located is None or (located.profiles is None and located.patching is None):
        return []
    parts = ["<h2>Where the instability sits (layer profiles, activation patching)</h2>"]
    profiles = located.profiles
    if profiles is not None and profiles.height:
        parts += [
            "<p>Mean over variants of 1 - cos(h_l(variant), h_l(base)) per layer l, with a 95% "
            "bootstrap band over prompts (a prompt's variants resampled together; drawn from "
            f"at least {MIN_PROMPTS} prompts, else no band). Onset: the first layer whose "
            f"profile reaches {ONSET_FRACTION:.0%} of its maximum.</p>",
            _onset_table(profiles),
            _image("layer-profiles", profile_figure(profiles)),
            _image("layer-profiles-strength", strength_figure(profiles)),
        ]
    elif profiles is not None:
        parts.append("<p>No hidden states in this run: no layer profiles.</p>")
    patching = located.patching
    by_layer = recovery_by_layer(patching) if patching is not None else None
    measured = patching is not None and (
        patching["recovery"].drop_nulls().len() or patching["kl_first_token"].drop_nulls().len()
    )
    if measured and by_layer is not None:
        assert patching is not None
        missing = patching.filter(pl.col("missing_reason").is_not_null())
        note = (
            f" {missing.height} of {patching.height} rows have no recovery or KL "
            "(reasons in patching.parquet)."
            if missing.height
            else ""
        )
        parts += [
            "<p>Each sampled variant run once per layer l with layer l's output at the last "
            "prompt token replaced by the base prompt's. Recovery: the share of the change in "
            "log p(base answer) it restores (1: all of it), per layer as a ratio of sums "
            "(the restored change summed over a family's variants over their summed "
            "|logp_base - logp_variant|, so a variant that barely moves log p weighs little) "
            "and the median of the variants' recoveries, each with a 95% bootstrap band over "
            f"prompts (from at least {MIN_PROMPTS} prompts). A variant has a recovery only "
            f"when |logp_base - logp_variant| is at least {MIN_RELATIVE_GAP:.0%} of "
            f"max(|logp_base|, {SCALE_FLOOR_NATS:g} nat); per-variant recoveries and their "
            "gaps are in patching.parquet. KL: of the first answer token's distribution to "
            f"the base's (0 at the last layer by construction).{note}</p>",
            _recovery_table(by_layer)
            if by_layer["ratio_of_sums"].drop_nulls().len()
            else "<p>No variant moved log p(base answer) past the guard: no recovery to "
            "report (only the KL).</p>",
            _missing_recoveries(by_layer),
            _image("patching-recovery", recovery_figure(patching, by_layer)),
        ]
    elif patching is not None:
        reasons = sorted(set(patching["missing_reason"].drop_nulls().to_list()))
        parts.append(
            "<p>Activation patching gave no recovery: "
            + html.escape("; ".join(reasons) or "no variant to patch")
            + "</p>"
        )
    return parts
