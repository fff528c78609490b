"""``sago compare A B --paired`` as Markdown: the paired table of two runs
(``statistics/paired_runs.py``), pooled rows first, with what was allowed to differ."""

from __future__ import annotations

from typing import Any

import polars as pl

from sago_core import markdown
from sago_core.config.saved import describe_sampling
from sago_core.report.markup import axis_rank
from sago_core.report.markup import number as _cell
from sago_core.statistics.paired_runs import PairedComparison
from sago_core.vocabulary import POOLED


def render_paired(comparison: PairedComparison) -> str:
    """The table as Markdown: pooled rows first, then the per-dataset rows."""
    table = comparison.table
    lines = ["# Paired comparison (B minus A, on s; above 0: B less stable)", ""]
    lines += [f"**WARNING: {w}**" for w in comparison.identity.warnings]
    lines += [""] if comparison.identity.warnings else []
    if not table.is_empty():
        first = table.row(0, named=True)
        lines += [
            f"A: {first['model_a']} ({first['run_a']})",
            f"B: {first['model_b']} ({first['run_b']})",
            f"margin: {first['margin']} SGS units; Holm/BH within the pooled rows and within "
            "the per-dataset rows",
            f"decoding: A {describe_sampling(comparison.sampling[0])}; B "
            f"{describe_sampling(comparison.sampling[1])}",
            *([f"design: {comparison.design}"] if comparison.design else []),
            "",
        ]
    if comparison.differences:
        lines += ["Configs differ (allowed):", ""]
        lines += [f"- {d.describe()}" for d in comparison.differences] + [""]
    lines += [
        "mean_diff: mean of B - A over every shared prompt, the mean the t, Wilcoxon and "
        "TOST tests test and the verdict reads; 95% CI: its bootstrap over those prompts; "
        "dataset-weighted: the equal-weight mean over datasets (the difference of pooled "
        "SGS), shown for reference only",
        "",
    ]
    columns = ["dataset", "axis", "n", "mean_diff", "95% CI", "dataset-weighted"]
    columns += ["p_paired_t", "p_wilcoxon", "p_tost", "p_holm", "p_bh", "verdict"]
    if not table.is_empty() and table["model_a"].n_unique() > 1:
        columns = ["model_a", "model_b", *columns]
    ordered = table.with_columns(
        (pl.col("dataset") != POOLED).alias("_later"),
        axis_rank().alias("_axis"),
    ).sort("model_a", "model_b", "_later", "dataset", "_axis")
    cells = [
        {**row, "95% CI": ci_cell(row), "dataset-weighted": row.get("mean_diff_datasets")}
        for row in ordered.iter_rows(named=True)
    ]
    lines += markdown.table(columns, [[_cell(c[name]) for name in columns] for c in cells])
    return "\n".join(lines) + "\n"


def ci_cell(row: dict[str, Any]) -> str:
    """A row's interval as "[low, high]", or NA with the reason it is missing."""
    low, high = row.get("ci_low"), row.get("ci_high")
    if low is not None and high is not None:
        return f"[{_cell(low)}, {_cell(high)}]"
    reason = row.get("ci_missing_reason") or row.get("missing_reason")
    return f"NA ({reason})" if reason else "NA"
