"""A budgeted run in the report: its line in the headline ("budgeted: 1,604 of 7,968 cells
(20%), stopped after round 3: ...") and a section with each round's cells and the
estimates of the full grid's SGS with their design intervals (sago_core/budget/)."""

from __future__ import annotations

import html
from typing import Any

import polars as pl

from sago_core.budget.record import budget_line
from sago_core.budget.rounds import split_column
from sago_core.report.markup import Section
from sago_core.report.markup import table as _table
from sago_core.vocabulary import POOLED

SECTION_KEY = "budget"
CAVEAT = (
    "Per-prompt scores and SGS are design-based estimates of what the full grid would give "
    "(stratified, inclusion probabilities in budget_cells.parquet); the significance marks "
    "are the budget's stopping rule's verdicts (its p-value over the looks, each test at "
    "its own level, not Holm over the rows); the tails, the peer indices and the instance "
    "explorer are over the cells asked."
)


def budget_headline(record: dict[str, Any] | None) -> str:
    """The headline's budget line; empty for a full-grid run."""
    if not record:
        return ""
    return (
        f"<p class='glance-note'><b>{html.escape(budget_line(record))}</b>. "
        f"{html.escape(CAVEAT)} <a href='#{SECTION_KEY}'>The design</a>.</p>"
    )


def _number(value: Any, digits: int = 4) -> str:
    return '<span class="na">NA</span>' if value is None else f"{value:.{digits}f}"


def _rounds(record: dict[str, Any]) -> str:
    watched = sorted({name for r in record["rounds"] for name in r["half_widths"]})
    rows = []
    for r in record["rounds"]:
        widths = [r["half_widths"].get(name) for name in watched]
        finite = [w for w in widths if w is not None]
        rows.append(
            [
                str(r["round"]),
                f"{r['cells']:,}",
                _number(max(finite) if finite else None),
            ]
        )
    return _table(["round", "cells asked (cumulative)", "widest pooled half-width"], rows)


def _estimates(estimates: pl.DataFrame) -> str:
    pooled = estimates.filter(pl.col("dataset") == POOLED).sort("model", "axis")
    rows = [
        [
            html.escape(r["model"]),
            html.escape(r["axis"]),
            _number(r["sgs"]),
            "&plusmn;" + _number(r["half_width"]),
            _number(r["target"]) if r["target"] is not None else "",
            str(r["prompts"]),
        ]
        for r in pooled.iter_rows(named=True)
    ]
    return _table(
        [
            "model",
            "axis",
            "SGS (estimate)",
            "design interval (95% over the looks)",
            "target",
            "prompts",
        ],
        rows,
        left=2,
    )


def budget_sections(record: dict[str, Any] | None, estimates: pl.DataFrame | None) -> list[Section]:
    """The section (none for a full-grid run)."""
    if not record:
        return []
    unmet = ", ".join(" / ".join(split_column(n)) for n in record["targets_unmet"])
    body = (
        f"<p>{html.escape(budget_line(record))}. The grid's (prompt, variant) cells were "
        f"sampled by strata at level '{html.escape(record['level'])}' "
        f"({record['prompts_sampled']} of {record['prompts']} prompts), in rounds that stop "
        "when every target half-width is met or every one-sided test is decided; looks "
        f"between rounds spend alpha by {html.escape(record['alpha_spending'])}, and the "
        "intervals are the rule's at the look the run stopped after (z = 3 at an interim "
        "look), which cover 95% whichever look that is. "
        f"{html.escape(CAVEAT)}</p>"
    )
    if unmet:
        body += f"<p><b>Target not met</b>: {html.escape(unmet)}.</p>"
    body += "<h3>Rounds</h3>" + _rounds(record)
    if estimates is not None and not estimates.is_empty():
        body += "<h3>Pooled SGS with its design interval</h3>" + _estimates(estimates)
    return [Section(SECTION_KEY, "Budgeted design", body)]
