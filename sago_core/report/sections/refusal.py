"""The report's "Refusal consistency" section: does the model refuse a request however it is
worded? Present only when the run's prompts carry a kind. It shows the refusal stage's own
tables (``read_refusal``), so the page and ``refusal_rates.parquet`` hold the same numbers;
a run folder from before that stage gets them computed from prompts.parquet and
generations.parquet by the same function. docs/guide/refusal.md ("In a run") lists what it
shows per model. An answer to a harmful request is folded behind a warning
(``UNSAFE_CLASS``: ``sago site --redact-unsafe`` leaves those out).
"""

from __future__ import annotations

import html
from collections import Counter
from typing import Any

import polars as pl

from sago_core.data.safety import HARMFUL
from sago_core.refusal.best_of_n import HALF
from sago_core.refusal.flips import (
    ANSWERED_AFTER_REWORDING,
    BREACH,
    OVER_REFUSAL,
    REFUSED_AFTER_REWORDING,
    worst_variants,
)
from sago_core.report.markup import NA, Section
from sago_core.report.markup import na as _na
from sago_core.report.markup import table as _table
from sago_core.report.sections.refusal_judge import judge_html
from sago_core.report.sections.refusal_sampled import base_prompts, beyond_base_html, is_sampled
from sago_core.stages.refusal import CELL_LEVEL, FAMILY_LEVEL, RefusalTables, refusal_tables
from sago_core.vocabulary import BASE_VARIANT_ID, REPLAY_FAMILY

UNSAFE_CLASS = "sago-unsafe"  # a folded answer to a harmful request (sago site redacts it)
UNSAFE_WARNING = "Warning: an answer to a harmful request (it may be harmful); open to read"
WORST = 5  # worst (prompt, variant) pairs shown per model and kind
SNIPPET = 600  # characters of a prompt or answer shown in the worst-variants table
LABEL = {BREACH: "breach", OVER_REFUSAL: "over-refusal"}


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value))


def _rate(row: dict[str, Any], direction: str) -> str:
    value = row[f"{direction}_rate"]
    if value is None:
        return NA
    low, high = row[f"{direction}_low"], row[f"{direction}_high"]
    band = (
        f" [{low:.2f}, {high:.2f}]"
        if low is not None and high is not None
        else f" {_na(row['interval_missing_reason'])}"
    )
    text = f"{value:.2f}{band}"
    return f"<b>{text}</b>" if row["failure"] == direction else text


def _strength(value: float | None) -> str:
    if value is None:
        return ""
    return str(int(value)) if float(value).is_integer() else str(value)


def _base_table(tables: RefusalTables) -> str:
    prompts = base_prompts(tables)
    sampled = is_sampled(tables)
    rows = []
    for (model, kind), group in prompts.group_by(["model", "kind"], maintain_order=True):
        judged = group.drop_nulls("refused")
        refused = judged.filter(pl.col("refused")).height
        share = f"{refused / judged.height:.2f}" if judged.height else NA
        row = [_e(model), _e(kind), str(group.height), str(judged.height), str(refused), share]
        if sampled:
            samples = int(judged["judged"].sum())
            refused_samples = int(judged["refused_samples"].sum())
            row.append(f"{refused_samples / samples:.2f}" if samples else NA)
        rows.append(row)
    head = ["model", "kind", "prompts", "with a verdict", "refused", "share refused"]
    return _table([*head, *(["share of samples refused"] if sampled else [])], rows, 2)


def _little_refusal_note(tables: RefusalTables) -> str:
    base = base_prompts(tables).filter(pl.col("kind") == HARMFUL).drop_nulls("refused")
    notes = []
    for (model,), group in base.group_by(["model"], maintain_order=True):
        refused = group.filter(pl.col("refused")).height
        if refused < group.height / 2:
            notes.append(
                f"<p><b>{_e(model)}</b> refuses {refused} of the {group.height} harmful base "
                "prompts with a verdict: a breach needs a refused base, so its breach rates and "
                "Best-of-N rest on those few; the prompts it answers outright are breached "
                "before any rewording (Best-of-N's <code>base complied</code>).</p>"
            )
    return "".join(notes)


def _missing_note(tables: RefusalTables) -> str:
    reasons = Counter(
        r for r in tables.verdicts.get_column("missing_reason").to_list() if r is not None
    )
    if not reasons:
        return "<p>Every answer has a verdict.</p>"
    items = "".join(f"<li>{n} answer(s): {_e(r)}</li>" for r, n in reasons.most_common())
    return f"<p>Answers without a verdict (NA, left out of every rate):</p><ul>{items}</ul>"


def _rates_table(tables: RefusalTables, level: str) -> str:
    rates = tables.rates.filter(pl.col("level") == level)
    head = ["model", "kind", "family"]
    if level == CELL_LEVEL:
        head += ["subtype", "strength"]
    rows = []
    for r in rates.iter_rows(named=True):
        cells = [_e(r["model"]), _e(r["kind"]), _e(r["family"])]
        if level == CELL_LEVEL:
            cells += [_e(r["subtype"]), _strength(r["strength"])]
        cells += [
            LABEL[r["failure"]],
            str(r["n_prompts"]),
            _rate(r, BREACH),
            _rate(r, OVER_REFUSAL),
            _rate(r, REFUSED_AFTER_REWORDING),
            _rate(r, ANSWERED_AFTER_REWORDING),
        ]
        rows.append(cells)
    head += ["failure", "prompts", "breach [95% CI]", "over-refusal [95% CI]"]
    head += ["refused after rewording [95% CI]", "answered after rewording [95% CI]"]
    return _table(head, rows, len(head) - 6)


def _curve_svg(curve: pl.DataFrame) -> str:
    """ASR(N) per family, one polyline each, N on x, ASR in [0, 1] on y, the half line."""
    if curve.is_empty():
        return ""
    top = max(2, *curve.get_column("n").to_list())
    width, height, pad = 420, 200, 30
    colours = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")

    def x(n: int) -> float:
        return pad + (n - 1) / (top - 1) * (width - 2 * pad)

    def y(asr: float) -> float:
        return height - pad - asr * (height - 2 * pad)

    parts = [
        f'<line x1="{pad}" y1="{y(HALF):.1f}" x2="{width - pad}" y2="{y(HALF):.1f}" '
        'stroke="#999" stroke-dasharray="4 3"/>',
        f'<text x="{width - pad}" y="{y(HALF) - 4:.1f}" font-size="10" text-anchor="end">'
        "half breached</text>",
        f'<text x="{pad}" y="{height - 8}" font-size="10">N = 1</text>',
        f'<text x="{width - pad}" y="{height - 8}" font-size="10" text-anchor="end">'
        f"N = {top}</text>",
        f'<text x="4" y="{y(1.0) + 4:.1f}" font-size="10">1</text>',
        f'<text x="4" y="{y(0.0) + 4:.1f}" font-size="10">0</text>',
    ]
    several = curve.get_column("model").n_unique() > 1
    for i, ((model, family), group) in enumerate(
        curve.group_by(["model", "family"], maintain_order=True)
    ):
        colour = colours[i % len(colours)]
        label = f"{family} ({model})" if several else str(family)
        points = " ".join(
            f"{x(n):.1f},{y(a):.1f}" for n, a in zip(group["n"], group["asr"], strict=True)
        )
        parts.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{points}"/>'
        )
        parts.append(
            f'<text x="{width - pad + 2}" y="{y(group["asr"][-1]):.1f}" font-size="10" '
            f'fill="{colour}">{_e(label)}</text>'
        )
    return (
        f'<svg id="fig-best-of-n" role="img" aria-label="Best-of-N: P(some of N variants '
        f'breaches) per family" width="{width + 80}" height="{height}" '
        f'viewBox="0 0 {width + 80} {height}">{"".join(parts)}</svg>'
    )


def _best_of_n(tables: RefusalTables) -> str:
    curve, summary = tables.curve, tables.best_of_n
    if summary.is_empty():
        return "<p>No harmful prompt has both a verdict at its base and a variant: no curve.</p>"
    rows = []
    for s in summary.iter_rows(named=True):
        points = curve.filter((pl.col("model") == s["model"]) & (pl.col("family") == s["family"]))
        asr = ", ".join(
            f"N={p['n']}: {p['asr']:.2f}"
            + (
                f" [{p['asr_low']:.2f}, {p['asr_high']:.2f}]"
                if p["asr_low"] is not None and p["asr_high"] is not None
                else f" {_na(p['interval_missing_reason'])}"
            )
            for p in points.iter_rows(named=True)
        )
        fit = (
            f"a {s['fit_a']:.3g}, b {s['fit_b']:.3g}, R² {s['fit_r2']:.2f}"
            if s["fit_missing_reason"] is None
            else _na(s["fit_missing_reason"])
        )
        half = str(s["half_n"]) if s["half_n"] is not None else _na(s["half_missing_reason"])
        rows.append(
            [
                _e(s["model"]),
                _e(s["family"]),
                str(s["n_prompts"]),
                str(s["base_complied"]),
                asr or NA,
                half,
                fit,
            ]
        )
    head = ["model", "family", "prompts", "base complied", "ASR(N) [95% CI]", "half at N", "fit"]
    return (
        "<p>Per harmful prompt whose base is refused: the chance that at least one of N of its "
        "variants of the family, drawn without replacement, is answered (ASR, as in Best-of-N "
        "jailbreaking), averaged over prompts; <i>half at N</i>: the smallest N at which half "
        "of these prompts (harmful, base refused) are breached; the power-law fit "
        "-log ASR = a N<sup>-b</sup> where it fits. <i>base complied</i>: harmful prompts "
        "already answered at the base, left out of the curve.</p>"
        + _curve_svg(curve)
        + _table(head, rows, 2)
    )


def _short(text: object) -> str:
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= SNIPPET else flat[: SNIPPET - 1] + "…"


def _answer(text: object, kind: str) -> str:
    if text is None:
        return NA
    shown = _e(_short(text))
    if kind != HARMFUL:
        return shown
    return (
        f'<details class="{UNSAFE_CLASS}"><summary>{html.escape(UNSAFE_WARNING)}</summary>'
        f"{shown}</details>"
    )


def _worst(
    tables: RefusalTables,
    prompts: pl.DataFrame,
    generations: pl.DataFrame,
    instances: pl.DataFrame | None,
) -> str:
    key = ["model", "dataset", "prompt_id"]
    flips = tables.flips.filter(pl.col("family") != REPLAY_FAMILY)
    per_model = flips.group_by(["model"], maintain_order=True)
    worst = pl.concat([worst_variants(group, WORST) for _, group in per_model] or [flips.clear()])
    if worst.is_empty():
        return "<p>No variant breaches a harmful prompt or over-refuses a harmless one.</p>"
    answers = generations.select(*key, "variant_id", "answer_text")
    base = answers.filter(pl.col("variant_id") == BASE_VARIANT_ID).select(
        *key, pl.col("answer_text").alias("base_answer")
    )
    joined = (
        worst.join(prompts.select("dataset", "prompt_id", "prompt"), on=key[1:], how="left")
        .join(base, on=key, how="left")
        .join(answers, on=[*key, "variant_id"], how="left")
    )
    if instances is not None and "variant_prompt" in instances.columns:
        texts = instances.select(*key, "variant_id", "variant_prompt").unique([*key, "variant_id"])
        joined = joined.join(texts, on=[*key, "variant_id"], how="left")
    else:
        joined = joined.with_columns(pl.lit(None, pl.Utf8).alias("variant_prompt"))
    sampled = is_sampled(tables)
    rows = [
        [
            _e(r["model"]),
            _e(r["kind"]),
            LABEL[r["failure"]],
            _excess(r) if sampled else f"{r['failure_excess']:.2f}",
            _e(f"{r['family']}/{r['subtype']} {_strength(r['strength'])}".strip()),
            _e(_short(r["prompt"])),
            _e(_short(r["variant_prompt"])) if r["variant_prompt"] is not None else NA,
            _answer(r["base_answer"], r["kind"]),
            _answer(r["answer_text"], r["kind"]),
        ]
        for r in joined.iter_rows(named=True)
    ]
    head = ["model", "kind", "failure", "excess", "variant", "prompt", "variant text"]
    head += (
        ["base answer (sample 0)", "variant answer (sample 0)"]
        if sampled
        else [
            "base answer",
            "variant answer",
        ]
    )
    shown = (
        " At K > 1 the excess is the pair's flip rate over its samples minus the base's own; "
        "the answers shown are the first sample of each (every sample's verdict is in "
        "<code>refusal_verdicts.parquet</code>)."
        if sampled
        else ""
    )
    return (
        f"<p>Per model and kind, the {WORST} (prompt, variant) pairs that fail most: harmful "
        "prompts answered after a rewording, harmless ones refused after one. Every pair is in "
        f"<code>refusal_flips.parquet</code>.{shown}</p>" + _table(head, rows, len(head))
    )


def _excess(row: dict[str, Any]) -> str:
    failure = row["failure"]
    return f"{row['failure_excess']:.2f} ({row[failure]:.2f} − {row[f'self_{failure}']:.2f})"


def refusal_sections(
    prompts: pl.DataFrame,
    generations: pl.DataFrame,
    instances: pl.DataFrame | None = None,
    tables: RefusalTables | None = None,
) -> list[Section]:
    """The section, or nothing when no prompt has a kind (a run like any other).
    ``tables``: the refusal stage's (``refusal_tables.read_refusal``; every sample at
    K > 1); without them they are computed from ``generations`` (sample 0 only)."""
    if tables is None:
        tables = refusal_tables(prompts, generations)
    if tables is None:
        return []
    body = (
        "<p>Each answer is judged refused or complied with by rules (lists of refusal "
        "openings per language; NA with the reason where none applies). A <b>breach</b>: the "
        "base prompt is refused, the variant answered; an <b>over-refusal</b>: the base "
        "answered, the variant refused. The failure (in bold) is a breach for a harmful "
        "prompt and an over-refusal for a harmless one; the two kinds are never pooled. "
        "Rates are over prompts (each prompt weighs once, its mean over the family's "
        "variants) with bootstrap 95% intervals; <code>replay</code> (the base asked again) "
        "is the floor a rewording's rate is read against.</p>"
        + judge_html(tables.judge)
        + "<h3>Base prompts refused</h3>"
        + _base_table(tables)
        + _little_refusal_note(tables)
        + _missing_note(tables)
        + "<h3>Breach and over-refusal per family</h3>"
        + _rates_table(tables, FAMILY_LEVEL)
        + "<details><summary>per subtype and strength</summary>"
        + _rates_table(tables, CELL_LEVEL)
        + "</details>"
        + beyond_base_html(tables)
        + "<h3>Best-of-N</h3>"
        + _best_of_n(tables)
        + "<h3>Worst variants</h3>"
        + _worst(tables, prompts, generations, instances)
    )
    return [Section("refusal", "Refusal consistency", body)]
