"""The report's headline block ("At a glance"): per model, what a reader wants first.

- **unstable axes**: per pooled axis, the largest tolerance eps (0.01, 0.05, 0.10) whose
  one-sided test of E[s] > eps is significant after Holm over every row of the summary (a
  budgeted run: by its stopping rule)
  (the family ``p_holm`` uses; for the eps 0.05 reference it is ``p_holm`` itself), with the
  report's marks; a run tested against the noise floor also names the axes above it;
- **worst family/subtype**: the highest mean variant RMS (the root mean square of one
  variant's |normalised delta| over the axes it has), from deltas.parquet, and its worst axis;
- **worst instance**: the variant with the highest RMS in instances.parquet (the card ranks
  the same way);
- **flip rates**: right to wrong and wrong to right over every judged variant
  (tails.parquet's pooled, all-family row);
- **against the previous release**: the paired verdicts when the run holds a comparison
  (card.json written by ``sago card --against`` or the watch), else the reason there is none.

Every fact the run cannot give is said (NA and why), never invented.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from sago_core.backends.model_source import EMBEDDED_ALIASES
from sago_core.report.flip_words import sampled
from sago_core.report.markup import NA
from sago_core.report.summary_md import significance_mark
from sago_core.statistics.multiple_testing import holm
from sago_core.statistics.tails import ALL_FAMILIES
from sago_core.vocabulary import AXES, POOLED, REPLAY_FAMILY

EPS_TESTS: tuple[tuple[float, str], ...] = (
    (0.01, "p_eps_0_01"),
    (0.05, "p_eps_0_05"),
    (0.10, "p_eps_0_10"),
)
ALPHA = 0.05
NOISE_FLOOR = "noise floor"
EXCERPT = 140


@dataclass(frozen=True)
class Unstable:
    axis: str
    eps: float  # the largest eps significantly exceeded
    p_holm: float  # its Holm-adjusted p


@dataclass(frozen=True)
class Worst:
    label: str  # family/subtype, or the instance's key
    rms: float
    n: int  # variants behind the value
    axis: str | None  # the axis with the largest mean |delta_norm| in it
    axis_value: float | None
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Glance:
    model: str
    unstable: list[Unstable]
    stable: list[str]  # measured axes exceeding no eps
    unmeasured: list[str]
    above_floor: list[str] | None  # None: the run does not test against the floor
    worst_subtype: Worst | None
    worst_instance: Worst | None
    instance_note: str | None
    flips: dict[str, Any] | None
    flip_note: str | None
    paired: dict[str, Any] | None
    paired_note: str | None
    flips_at_k: bool = False  # K > 1: the flips are excesses over the self-flip (flip_words)


def _order(axis: str) -> tuple[int, str]:
    return (AXES.index(axis) if axis in AXES else len(AXES), axis)


def adjusted_eps(summary: pl.DataFrame) -> pl.DataFrame:
    """The summary with ``holm_eps_0_01`` .. ``holm_eps_0_10``: each eps test's p adjusted
    (Holm) over every row of the summary that has one."""
    return summary.with_columns(
        pl.Series(f"holm_{column[2:]}", holm(summary[column].to_list()), dtype=pl.Float64)
        for _, column in EPS_TESTS
    )


def unstable_axes(summary: pl.DataFrame, model: str) -> tuple[list[Unstable], list[str], list[str]]:
    """(unstable axes with their largest significant eps, stable axes, unmeasured axes) of
    ``model``'s pooled rows."""
    pooled = adjusted_eps(summary).filter(model=model, dataset=POOLED)
    unstable, stable, unmeasured = [], [], []
    for row in sorted(pooled.iter_rows(named=True), key=lambda r: _order(r["axis"])):
        if row["sgs"] is None:
            unmeasured.append(row["axis"])
            continue
        exceeded = [
            (eps, row[f"holm_{column[2:]}"])
            for eps, column in EPS_TESTS
            if row[f"holm_{column[2:]}"] is not None and row[f"holm_{column[2:]}"] < ALPHA
        ]
        if exceeded:
            eps, p = exceeded[-1]
            unstable.append(Unstable(row["axis"], eps, p))
        else:
            stable.append(row["axis"])
    return unstable, stable, unmeasured


def above_floor(summary: pl.DataFrame, model: str) -> list[str] | None:
    """Axes whose s exceeds the noise floor (Holm p < 0.05), when the run tests against it."""
    if "reference" not in summary.columns or NOISE_FLOOR not in summary["reference"].to_list():
        return None
    rows = summary.filter(
        (pl.col("model") == model)
        & (pl.col("dataset") == POOLED)
        & (pl.col("reference") == NOISE_FLOOR)
        & (pl.col("p_holm") < ALPHA)
    )
    return sorted(rows["axis"].to_list(), key=_order)


def variant_rms(columns: list[str]) -> pl.Expr:
    """A variant's RMS over its axes' deltas (``columns``): how the page and the card rank
    the worst variants."""
    squares = pl.concat_list([pl.col(c).abs().pow(2) for c in columns]).list.drop_nulls()
    return squares.list.mean().sqrt()


def worst_subtype(deltas: pl.DataFrame, model: str) -> Worst | None:
    """The family/subtype with the highest mean variant RMS (replay left out)."""
    key = ["dataset", "prompt_id", "variant_id", "family", "subtype"]
    rows = deltas.filter(
        (pl.col("model") == model)
        & (pl.col("family") != REPLAY_FAMILY)
        & pl.col("delta_norm").is_not_null()
    )
    if not len(rows):
        return None
    per_variant = rows.group_by(key).agg(pl.col("delta_norm").pow(2).mean().sqrt().alias("rms"))
    ranked = (
        per_variant.group_by("family", "subtype")
        .agg(pl.col("rms").mean(), pl.len().alias("n"))
        .sort(["rms", "family", "subtype"], descending=[True, False, False])
    )
    top = ranked.row(0, named=True)
    by_axis = (
        rows.filter((pl.col("family") == top["family"]) & (pl.col("subtype") == top["subtype"]))
        .group_by("axis")
        .agg(pl.col("delta_norm").abs().mean().alias("m"))
        .sort(["m", "axis"], descending=[True, False])
    )
    axis = by_axis.row(0, named=True)
    return Worst(f"{top['family']}/{top['subtype']}", top["rms"], top["n"], axis["axis"], axis["m"])


def worst_instance(instances: pl.DataFrame, model: str) -> Worst | None:
    """The variant with the highest RMS of its d_<axis> columns (None: none measured)."""
    columns = [c for c in instances.columns if c.startswith("d_")]
    columns.sort(key=lambda c: _order(c[2:]))
    ranked = (
        instances.filter(pl.col("model") == model)
        .with_columns(variant_rms(columns).alias("rms"))
        .filter(pl.col("rms").is_not_null())
        .sort("rms", descending=True, maintain_order=True)
    )
    if not len(ranked):
        return None
    top = ranked.row(0, named=True)
    measured = [(c[2:], abs(top[c])) for c in columns if top[c] is not None]
    axis, value = max(measured, key=lambda item: item[1])
    where = f"{top['dataset']}/{top['prompt_id']}"
    return Worst(where, top["rms"], 1, axis, value, detail=top)


def flip_rates(tails: pl.DataFrame, model: str) -> tuple[dict[str, Any] | None, str | None]:
    """The pooled, all-family flip rates (the same on every axis row): (row, None) or (None,
    why not)."""
    rows = tails.filter(model=model, dataset=POOLED, family=ALL_FAMILIES)
    if not len(rows):
        return None, "tails.parquet holds no pooled row for this model"
    judged = rows.filter(pl.col("flip_right_to_wrong").is_not_null())
    if len(judged):
        return judged.row(0, named=True), None
    reasons = rows["flip_missing_reason"].drop_nulls().unique().sort().to_list()
    return None, "; ".join(reasons) or "no variant judged against reference answers"


def _paired_for(paired: dict[str, Any] | None, model: str) -> tuple[dict | None, str | None]:
    if paired is None:
        return None, None
    rows = [r for r in paired.get("rows", []) if r.get("model_b") == model]
    if not rows:
        return None, "the run's paired comparison holds no row for this model"
    return {**paired, "rows": rows}, None


NO_COMPARISON = (
    "no comparison with a previous release in this run's artifacts (a paired comparison "
    "is made by <code>sago card RUN --against EARLIER</code> or by the watch for each new "
    "release, written to card.json; <code>sago report RUN</code> then shows it here)"
)


def glances(
    summary: pl.DataFrame,
    deltas: pl.DataFrame,
    instances: pl.DataFrame | None = None,
    tails: pl.DataFrame | None = None,
    paired: dict[str, Any] | None = None,
    paired_note: str | None = None,
) -> list[Glance]:
    """One headline per model of the summary. ``paired``: card.json's ``paired`` block (the
    pooled verdicts, B = this run); ``paired_note``: why there is none, when known."""
    out = []
    for model in sorted(summary["model"].unique().to_list()):
        unstable, stable, unmeasured = unstable_axes(summary, model)
        instance = worst_instance(instances, model) if instances is not None else None
        instance_note = (
            "no instances.parquet in this run"
            if instances is None
            else ("no variant with a measured delta" if instance is None else None)
        )
        flips, flip_note = flip_rates(tails, model) if tails is not None else (None, None)
        if tails is None:
            flip_note = "no tails.parquet in this run"
        mine, missing = _paired_for(paired, model)
        out.append(
            Glance(
                model=model,
                unstable=unstable,
                stable=stable,
                unmeasured=unmeasured,
                above_floor=above_floor(summary, model),
                worst_subtype=worst_subtype(deltas, model),
                worst_instance=instance,
                instance_note=instance_note,
                flips=flips,
                flip_note=flip_note,
                paired=mine,
                paired_note=missing or paired_note,
                flips_at_k=sampled(instances),
            )
        )
    return out


def _num(value: float | None, digits: int = 3) -> str:
    if value is None:
        return NA
    return f"{value:.{digits}f}" if abs(value) >= 10**-digits or value == 0 else f"{value:.2g}"


def _excerpt(text: Any) -> str:
    value = " ".join(str(text or "").split())
    return html.escape(value if len(value) <= EXCERPT else value[: EXCERPT - 1] + "…")


def _unstable_html(glance: Glance) -> str:
    if glance.unstable:
        said = ", ".join(
            f"<b>{html.escape(u.axis)}</b> &gt; {u.eps:.2f}{significance_mark(u.p_holm)}"
            for u in glance.unstable
        )
    else:
        said = "none at any eps" if glance.stable else "no axis measured"
    extra = []
    if glance.stable:
        extra.append("no eps exceeded: " + html.escape(", ".join(glance.stable)))
    if glance.unmeasured:
        extra.append("not measured: " + html.escape(", ".join(glance.unmeasured)))
    if glance.above_floor is not None:
        extra.append(
            "above the noise floor: " + html.escape(", ".join(glance.above_floor) or "none")
        )
    return said + (f" ({'; '.join(extra)})" if extra else "")


def _subtype_html(worst: Worst | None) -> str:
    if worst is None:
        return NA + " (no measured delta)"
    return (
        f"<b>{html.escape(worst.label)}</b>: mean variant RMS {_num(worst.rms)} over "
        f"{worst.n} variant(s); worst axis {html.escape(str(worst.axis))} "
        f"(mean |delta_norm| {_num(worst.axis_value)})"
    )


def _instance_html(worst: Worst | None, note: str | None) -> str:
    if worst is None:
        return f"{NA} ({html.escape(note or '')})"
    d = worst.detail
    variant = "/".join(str(d.get(k)) for k in ("family", "subtype") if d.get(k) is not None)
    strength = d.get("strength")
    where = ", ".join(
        part
        for part in (
            f"strength {strength:g}" if isinstance(strength, float | int) else "",
            str(d.get("position") or ""),
        )
        if part
    )
    return (
        f"<b>{html.escape(worst.label)}</b> ({html.escape(variant)}"
        + (f", {html.escape(where)}" if where else "")
        + f"): RMS {_num(worst.rms)}, largest on {html.escape(str(worst.axis))} "
        f"(|delta_norm| {_num(worst.axis_value)}); variant prompt "
        f"<q>{_excerpt(d.get('variant_prompt'))}</q>"
    )


def _flips_html(flips: dict[str, Any] | None, note: str | None, at_k: bool = False) -> str:
    if flips is None:
        return f"{NA} ({html.escape(note or '')})"

    def one(name: str) -> str:
        low, high = flips.get(f"ci_low_{name}"), flips.get(f"ci_high_{name}")
        ci = f" [{_num(low)}, {_num(high)}]" if low is not None and high is not None else ""
        return _num(flips.get(name)) + ci

    judged = flips.get("n_judged")
    return (
        ("mean beyond the base's self-flip rate (K &gt; 1): " if at_k else "")
        + f"right→wrong <b>{one('flip_right_to_wrong')}</b>, wrong→right "
        f"{one('flip_wrong_to_right')}"
        + (f" of {judged} judged variant(s)" if judged is not None else "")
    )


VERDICT_WORDS = (
    ("b_worse", "less stable"),
    ("b_better", "more stable"),
    ("equivalent", "equivalent"),
    ("inconclusive", "inconclusive"),
)


def _paired_html(paired: dict[str, Any] | None, note: str | None) -> str:
    if paired is None:
        return html.escape(note) if note else NO_COMPARISON
    rows = paired["rows"]
    earlier = ", ".join(sorted({str(r.get("model_a")) for r in rows}))
    groups = []
    for verdict, words in VERDICT_WORDS:
        axes = sorted((r["axis"] for r in rows if r.get("verdict") == verdict), key=_order)
        if axes:
            text = html.escape(", ".join(axes))
            groups.append(
                f"<b>{words}</b> on {text}" if verdict == "b_worse" else f"{words} on {text}"
            )
    unjudged = sorted((r["axis"] for r in rows if not r.get("verdict")), key=_order)
    if unjudged:
        groups.append("no verdict on " + html.escape(", ".join(unjudged)))
    return (
        f"against {html.escape(earlier)} (<code>{html.escape(str(paired.get('against')))}</code>"
        f", margin {paired.get('margin')}): " + "; ".join(groups)
    )


def weak_rewriter_note(provenance: Mapping[str, Any] | None, variants: pl.DataFrame) -> str | None:
    """When the structural variants were rewritten by the embedded model: it is small, and
    most of what it writes answers the question instead of rewording it (rejected with the
    reason in variants.parquet), so its kept rewrites are worth reading. None otherwise."""
    config = (provenance or {}).get("config") or {}
    structural = (config.get("variants") or {}).get("structural")
    rewriter = structural.get("rewriter") if isinstance(structural, Mapping) else None
    if not isinstance(rewriter, str) or rewriter.partition(":")[2] not in EMBEDDED_ALIASES:
        return None
    rows = variants.filter(pl.col("family") == "structural")
    kept = int(rows["kept"].sum()) if len(rows) else 0
    return (
        f"Structural variants by the embedded {html.escape(rewriter)}: a weak rewriter: read "
        f"the kept rewrites ({kept} kept of {len(rows)} asked; the rest were rejected with "
        "their reason, in the table of variants kept and rejected below and in "
        "variants.parquet)."
    )


def headline_html(
    items: list[Glance],
    encoder: str | None = None,
    rewriter_note: str | None = None,
    budgeted: bool = False,
) -> str:
    """The block's body: one short list per model; ``encoder``: the BERTScore encoder
    behind every BERT number of the page, said under the block's note; ``rewriter_note``:
    a warning on the structural rewriter (``weak_rewriter_note``); ``budgeted``: the
    summary's tests are a budgeted run's stopping rule's."""
    if not items:
        return "<p>No model in the summary.</p>"
    test = (
        "the budget's stopping rule over its looks, each test at its own level"
        if budgeted
        else "one-sided t-test, Holm over every row of the summary"
    )
    parts = [
        "<p class='glance-note'>Unstable: the largest tolerance eps the pooled SGS "
        f"significantly exceeds ({test}, p &lt; 0.05; marks * p&lt;0.05, ** p&lt;0.01, "
        "*** p&lt;0.001). Variant RMS: the root mean square of one variant's |normalised "
        "delta| over its axes. Details follow below.</p>"
    ]
    if encoder:
        parts.append(
            f"<p class='glance-note'>BERT numbers (the bert axis, the PSS form on BERTScore) "
            f"are BERTScore F1 by {html.escape(encoder)}: another encoder gives other "
            "numbers.</p>"
        )
    if rewriter_note:
        parts.append(f"<p class='glance-note'><b>{rewriter_note}</b></p>")
    for g in items:
        facts = [
            ("Unstable axes", _unstable_html(g)),
            ("Worst family/subtype", _subtype_html(g.worst_subtype)),
            ("Worst instance", _instance_html(g.worst_instance, g.instance_note)),
            ("Answer flips", _flips_html(g.flips, g.flip_note, g.flips_at_k)),
            ("Against the previous release", _paired_html(g.paired, g.paired_note)),
        ]
        items_html = "".join(f"<li><b>{name}</b>: {text}</li>" for name, text in facts)
        parts.append(
            f"<div class='glance'><h3>{html.escape(g.model)}</h3><ul>{items_html}</ul></div>"
        )
    return "".join(parts)
