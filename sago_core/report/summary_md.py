"""The human summary: per model, an axes x datasets table of SGS with significance marks.

Marks read the Holm-adjusted p-value (``p_holm``: the run's reference test, E[s] > eps 0.05
or s above the noise floor, corrected over every row of the summary), the corrected p the
page prints and says it uses: * p_holm < 0.05, ** < 0.01, *** < 0.001. An uncorrected p
below 0.05 whose Holm p is not gets no mark. ``marks_legend()`` is the one wording of that
rule on every page. A missing axis prints as "NA" with its reason below the table, never
as 0.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from sago_core.budget.record import budget_line
from sago_core.markdown import table
from sago_core.scoring.encoder import axis_label
from sago_core.vocabulary import AXES, POOLED


def significance_mark(p: float | None) -> str:
    if p is None:
        return ""
    if p < 0.001:
        return "***"
    if p < 0.01:
        return "**"
    if p < 0.05:
        return "*"
    return ""


def marks_legend(reference: str | None, budgeted: bool = False) -> str:
    """What the marks mean, for a summary whose reference test is ``reference``;
    ``budgeted``: a budgeted run's, whose eps tests are its stopping rule's
    (scoring/summary.py ``with_budget_verdicts``)."""
    test = "s > noise floor (paired)" if reference == "noise floor" else "E[s] > 0.05"
    if budgeted and reference != "noise floor":
        return (
            f"marks: the budget's stopping rule's p (over its looks, each test at its own "
            f"level, no correction over the rows) of {test}: * p<0.05, ** p<0.01, *** p<0.001"
        )
    return (
        f"marks: Holm-adjusted p (over every row of the summary) of the one-sided t-test of "
        f"{test}: * p<0.05, ** p<0.01, *** p<0.001"
    )


def sgs_cell(row: dict | None) -> str | None:
    """SGS with its significance mark from the Holm-adjusted p of the run's reference test
    (eps 0.05 unless the run tests against the noise floor), or None when there is no SGS."""
    if row is None or row["sgs"] is None:
        return None
    return f"{row['sgs']:.4f}{significance_mark(row.get('p_holm'))}"


def _cell(row: dict | None) -> str:
    return sgs_cell(row) or "NA"


def render_summary(
    summary: pl.DataFrame,
    kept_counts: pl.DataFrame | None = None,
    identity_drift: list[str] | None = None,
    encoder: str | None = None,
    budget: dict[str, Any] | None = None,
) -> str:
    """``identity_drift``: one line per API model whose answers came from more than one
    served identity (``api_served.describe_drift``), flagged above the tables; ``encoder``:
    the BERTScore encoder behind the ``bert`` row (``scoring/encoder.py``), named in it;
    ``budget``: a budgeted run's budget.json, its line first."""
    lines = ["# SAGO summary", ""]
    if budget:
        lines += [
            f"**{budget_line(budget)}** (SGS: design-based estimates of the full grid's).",
            "",
        ]
    if identity_drift:
        lines += [
            "**Model identity drift**: these models' answers came from more than one served "
            "model or system fingerprint, so their deltas may mix two models:",
            "",
            *(f"- {line}" for line in identity_drift),
            "",
        ]
    reference = summary["reference"][0] if "reference" in summary.columns and len(summary) else None
    lines.append(
        "SGS per axis (RMS of normalised deltas, mean over prompts); "
        f"{marks_legend(reference, budget is not None)}."
        " Lower is more stable."
    )
    if encoder:
        lines.append(f"BERT: BERTScore F1 by {encoder} (another encoder gives other numbers).")
    for model in sorted(summary["model"].unique().to_list()):
        rows = summary.filter(pl.col("model") == model)
        datasets = sorted(d for d in rows["dataset"].unique().to_list() if d != POOLED)
        columns = [*datasets, POOLED]
        index = {(r["dataset"], r["axis"]): r for r in rows.iter_rows(named=True)}
        names = [*AXES, *sorted(set(rows["axis"].drop_nulls().to_list()) - set(AXES))]
        cells = [
            [axis_label(a, encoder), *(_cell(index.get((d, a))) for d in columns)] for a in names
        ]
        lines += ["", f"## {model}", "", *table(["axis", *columns], cells)]
        pooled_n = {r["axis"]: r["n"] for r in rows.iter_rows(named=True) if r["dataset"] == POOLED}
        lines.append("")
        lines.append(
            "Prompts per axis (pooled): " + ", ".join(f"{a}={pooled_n.get(a, 0)}" for a in names)
        )
        missing = rows.filter(pl.col("missing_reason").is_not_null())
        for r in missing.iter_rows(named=True):
            lines.append(f"- NA {r['axis']} on {r['dataset']}: {r['missing_reason']}")
    if kept_counts is not None and len(kept_counts):
        lines += ["", "## Variants kept by the semantic filter", ""]
        lines += table(["family", "kept", "rejected"], kept_counts.rows())
    return "\n".join(lines) + "\n"


def kept_counts(variants: pl.DataFrame) -> pl.DataFrame:
    return (
        variants.group_by("family")
        .agg(pl.col("kept").sum().alias("kept"), (~pl.col("kept")).sum().alias("rejected"))
        .sort("family")
    )
