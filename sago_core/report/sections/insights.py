"""The report's beyond-the-mean sections, from their artifacts alone: tail risk beside SGS
(tails.parquet), which axes are redundant (axis_structure.parquet, axis_pca.parquet), graded
mirroring and the instance explorer (instances.parquet)."""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from sago_core.artifacts.layout import (
    AXIS_PCA_FILE,
    AXIS_STRUCTURE_FILE,
    INSTANCES_FILE,
    TAILS_FILE,
)
from sago_core.report.flip_words import AT_K, flip_headers, sampled
from sago_core.report.markup import NA, Section, p_value
from sago_core.report.markup import table as _table
from sago_core.report.sections.explorer import explorer_section
from sago_core.statistics.axis_structure import REDUNDANT_P, REDUNDANT_RHO, redundancy_note
from sago_core.statistics.intervals import MIN_PROMPTS
from sago_core.statistics.tails import ALL_FAMILIES
from sago_core.vocabulary import AXES, POOLED


@dataclass(frozen=True)
class Insights:
    instances: pl.DataFrame | None = None
    tails: pl.DataFrame | None = None
    axis_structure: pl.DataFrame | None = None
    axis_pca: pl.DataFrame | None = None


def read_insights(*paths: str | Path | None) -> Insights | None:
    """Instances, tails, axis structure, PCA (in that order; None = not made)."""
    frames = [pl.read_parquet(p) if p else None for p in paths]
    return Insights(*frames) if any(f is not None for f in frames) else None


def insights_from_run(run_dir: Path) -> Insights | None:
    names = (INSTANCES_FILE, TAILS_FILE, AXIS_STRUCTURE_FILE, AXIS_PCA_FILE)
    return read_insights(*(run_dir / n if (run_dir / n).exists() else None for n in names))


def _num(value: Any) -> str:
    if value is None:
        return NA
    return f"{value:.3g}" if abs(value) < 1e-3 and value != 0 else f"{value:.4f}"


def _with_ci(row: dict, name: str) -> str:
    low, high = row.get(f"ci_low_{name}"), row.get(f"ci_high_{name}")
    ci = f" [{_num(low)}, {_num(high)}]" if low is not None and high is not None else ""
    return _num(row.get(name)) + ci


def tails_section(tails: pl.DataFrame, summary: pl.DataFrame, at_k: bool = False) -> str:
    """``at_k``: a run at K > 1 samples, whose flip columns are excesses (flip_words)."""
    pooled = tails.filter((pl.col("dataset") == POOLED) & (pl.col("family") == ALL_FAMILIES))
    sgs = {
        (r["model"], r["axis"]): r
        for r in summary.filter(pl.col("dataset") == POOLED).iter_rows(named=True)
    }
    order = {axis: i for i, axis in enumerate(AXES)}
    rows = []
    for r in sorted(pooled.iter_rows(named=True), key=lambda r: (r["model"], order[r["axis"]])):
        mean = sgs.get((r["model"], r["axis"]), {})
        rows.append(
            [
                html.escape(r["model"]),
                r["axis"],
                _num(mean.get("sgs")),
                str(r["n"]),
                _with_ci(r, "q50"),
                _with_ci(r, "q90"),
                _with_ci(r, "q99"),
                _num(r["max"]),
                _num(r["share_over_0_05"]),
                _num(r["share_over_0_10"]),
                _with_ci(r, "flip_right_to_wrong"),
                _with_ci(r, "flip_wrong_to_right"),
                html.escape(
                    "; ".join(
                        str(r[c])
                        for c in ("missing_reason", "flip_missing_reason", "ci_missing_reason")
                        if r.get(c)
                    )
                ),
            ]
        )
    headers = [
        "model",
        "axis",
        "SGS",
        "variants",
        "q50 |d| [95% CI]",
        "q90",
        "q99",
        "max",
        "share > 0.05",
        "share > 0.10",
        *flip_headers(at_k),
        "note",
    ]
    return (
        "<p>SGS is a mean; these are the tails of |delta_norm| over every kept variant "
        "(all datasets and families; per dataset and family in <code>tails.parquet</code>). "
        "Quantiles are numpy's linear ones; flips compare the base answer and the variant's "
        "answer with the reference answers (the same on every axis row; NA without "
        f"references{'; ' + AT_K if at_k else ''}). Intervals: 95% bootstrap over prompts, "
        f"drawn only from at least {MIN_PROMPTS} prompts with a value (else the note says "
        "why).</p>" + _table(headers, rows, left=2)
    )


def structure_section(structure: pl.DataFrame, pca: pl.DataFrame | None) -> str:
    parts = [
        f"<p>Spearman's rho between per-prompt scores s of two axes, pooled over datasets. "
        f"A pair is redundant when |rho| &gt; {REDUNDANT_RHO} and p &lt; {REDUNDANT_P}.</p>"
    ]
    for model in sorted(structure["model"].unique().to_list()):
        pairs, own = redundancy_note(structure, model)
        said = ", ".join(f"{a}–{b}" for a, b in pairs) or "none"
        parts.append(
            f"<h3>{html.escape(model)}</h3><p class='axis-note'>Redundant on this run: "
            f"{html.escape(said)}. Carrying their own signal: "
            f"{html.escape(', '.join(own) or 'none')}.</p>"
        )
        rows = [
            [
                r["axis_a"],
                r["axis_b"],
                _num(r["spearman_rho"]),
                p_value(r["p_value"]),
                str(r["n"]),
                html.escape(r["missing_reason"] or ("redundant" if r["redundant"] else "")),
            ]
            for r in structure.filter(pl.col("model") == model).iter_rows(named=True)
        ]
        parts.append(_table(["axis", "axis", "rho", "p", "prompts", "note"], rows, left=2))
        if pca is not None:
            parts.append(_pca_table(pca.filter(pl.col("model") == model)))
    return "".join(parts)


def _pca_table(pca: pl.DataFrame) -> str:
    scored = pca.drop_nulls("pca_component")
    if not len(scored):
        reasons = sorted(set(pca["missing_reason"].drop_nulls().to_list()))
        return f"<p>No principal components: {html.escape('; '.join(reasons))}.</p>"
    axes = [a for a in AXES if a in set(scored["axis"])]
    rows = []
    for (component,), frame in sorted(scored.group_by(["pca_component"]), key=lambda g: g[0]):
        loading = dict(zip(frame["axis"], frame["pca_loading"], strict=True))
        rows.append(
            [
                f"PC{component}",
                _num(frame["pca_variance_explained"][0]),
                *(_num(loading.get(a)) for a in axes),
            ]
        )
    left_out = pca.filter(pl.col("pca_component").is_null())
    note = "".join(
        f" {html.escape(r['axis'])}: {html.escape(r['missing_reason'])}."
        for r in left_out.iter_rows(named=True)
    )
    return (
        f"<p>Principal components of the standardised scores (n = {scored['n'][0]} "
        f"prompts).{note}</p>" + _table(["component", "variance explained", *axes], rows, left=1)
    )


def intensity_section(instances: pl.DataFrame) -> str:
    graded = instances.group_by("model", "family", "subtype").agg(
        pl.col("mr_intensity").drop_nulls().len().alias("n"),
        pl.col("mr_intensity").mean().alias("mean"),
        (pl.col("mr_intensity") > 0).mean().alias("partial"),
        (pl.col("mr_intensity") >= 1).mean().alias("full"),
        pl.col("d_mr").abs().mean().alias("binary"),
        pl.col("mr_intensity_reason").drop_nulls().mode().first().alias("reason"),
    )
    rows = [
        [
            html.escape(r["model"]),
            html.escape(f"{r['family']}/{r['subtype']}"),
            str(r["n"]),
            _num(r["mean"]),
            _num(r["partial"]),
            _num(r["full"]),
            _num(r["binary"]),
            html.escape(r["reason"] or ""),
        ]
        for r in graded.sort("model", "family", "subtype").iter_rows(named=True)
    ]
    return (
        "<p>Beside the binary MR axis: the graded mirroring intensity in [0, 1] per variant "
        "(noise: share of the inserted noise reproduced; register: marker surplus over the "
        "base answer against the prompt's; length: the log-share of the way to the target "
        "length; mood: binary).</p>"
        + _table(
            [
                "model",
                "variant",
                "variants",
                "mean intensity",
                "share > 0",
                "share = 1",
                "mean |MR delta|",
                "note",
            ],
            rows,
            left=2,
        )
    )


def tail_sections(insights: Insights | None, summary: pl.DataFrame) -> list[Section]:
    """Placed right after the pooled SGS table."""
    if insights is None or insights.tails is None:
        return []
    at_k = sampled(insights.instances)
    return [Section("tails", "Tail risk beside SGS", tails_section(insights.tails, summary, at_k))]


def detail_sections(
    insights: Insights | None, prompts: pl.DataFrame | None = None
) -> list[Section]:
    """Axis structure, graded mirroring and the instance explorer (``prompts``: its kinds)."""
    parts: list[Section] = []
    if insights is not None and insights.axis_structure is not None:
        parts.append(
            Section(
                "axis-structure",
                "Axis structure",
                structure_section(insights.axis_structure, insights.axis_pca),
            )
        )
    if insights is not None and insights.instances is not None:
        parts += [
            Section("mirroring", "Graded mirroring", intensity_section(insights.instances)),
            Section(
                "instances",
                "Instance explorer: every variant you can read",
                explorer_section(insights.instances, prompts),
            ),
        ]
    return parts
