"""The watch's leaderboard over every evaluated model: ``leaderboard.parquet`` (pooled SGS
per model and axis, with the release's family, its stability card and its paired verdict
against the release before it) and ``leaderboard.html`` (a table of releases linking their
cards and marking significant regressions, then one report across all evaluated models).

A significant regression is a pooled paired verdict ``b_worse``: the Holm-adjusted paired
t-test against the previous release of the family rejects and the equivalence test does
not (``statistics/paired.py``). Verdicts are read from each release's ``card.json``. A
release the watch ran under a budget shows its steps (``watch/escalation.py``): each budget,
its cells and the verdicts that stayed undecided, up to the one it stopped at.
"""

from __future__ import annotations

import html
import json
import os
from pathlib import Path
from typing import Any

import polars as pl

from sago_core.artifacts.layout import CARD_HTML_FILE, CARD_JSON_FILE, MANIFEST_FILE, SUMMARY_FILE
from sago_core.artifacts.store import write_parquet, write_text
from sago_core.report.compare.page import compare_runs
from sago_core.report.markup import plain_table
from sago_core.vocabulary import POOLED
from sago_core.watch.registry import Entry, Registry
from sago_core.watch.releases import model_family
from sago_core.watch.steps import describe_steps

LEADERBOARD_FILE = "leaderboard.parquet"
LEADERBOARD_PAGE = "leaderboard.html"
LEADERBOARD = {
    "model": pl.String,
    "identity": pl.String,
    "axis": pl.String,
    "sgs": pl.Float64,
    "p_reference": pl.Float64,
    "run_dir": pl.String,
    "evaluated_at": pl.Float64,
    "family": pl.String,  # releases/model_family
    "card": pl.String,  # the release's card.html, null when none was written
    "against": pl.String,  # the previous release of the family its card compares with
    "paired_verdict": pl.String,  # pooled verdict on this axis against that release
    "regression": pl.Boolean,  # paired_verdict == "b_worse"
    "budget_steps": pl.String,  # the budgets the release ran at (null: the full grid alone)
}


def _card(entry: Entry) -> dict[str, Any] | None:
    path = Path(entry.run_dir) / CARD_JSON_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _verdicts(card: dict[str, Any] | None) -> tuple[str | None, dict[str, str | None]]:
    paired = (card or {}).get("paired")
    if not paired:
        return None, {}
    rows = paired.get("rows") or []
    against = rows[0]["model_a"] if rows else paired.get("against")
    return against, {r["axis"]: r["verdict"] for r in rows}


def leaderboard_rows(entries: list[Entry]) -> list[dict[str, Any]]:
    rows = []
    for entry in entries:
        summary = Path(entry.run_dir) / SUMMARY_FILE
        if not summary.exists():
            continue
        card = _card(entry)
        card_page = Path(entry.run_dir) / CARD_HTML_FILE
        against, verdicts = _verdicts(card)
        pooled = pl.read_parquet(summary).filter(dataset=POOLED, model=entry.spec)
        for r in pooled.iter_rows(named=True):
            verdict = verdicts.get(r["axis"])
            rows.append(
                {
                    "model": entry.spec,
                    "identity": entry.identity,
                    "axis": r["axis"],
                    "sgs": r["sgs"],
                    "p_reference": r.get("p_reference", r["p_eps_0_05"]),
                    "run_dir": entry.run_dir,
                    "evaluated_at": entry.evaluated_at,
                    "family": model_family(entry.spec),
                    "card": str(card_page) if card_page.is_file() else None,
                    "against": against,
                    "paired_verdict": verdict,
                    "regression": None if verdict is None else verdict == "b_worse",
                    "budget_steps": describe_steps(entry.budget_steps),
                }
            )
    return rows


def releases_section(table: pl.DataFrame, root: Path) -> str:
    """One row per release: family, card link, and the axes it regressed on."""
    if table.is_empty():
        return ""
    body = []
    releases = table.group_by("model", "identity", maintain_order=True).agg(
        pl.col("family").first(),
        pl.col("evaluated_at").first(),
        pl.col("card").first(),
        pl.col("against").first(),
        pl.col("axis").filter(pl.col("regression").fill_null(False)).alias("regressed"),
        pl.col("paired_verdict").is_not_null().any().alias("compared"),
        pl.col("budget_steps").first(),
    )
    for r in releases.sort("family", "evaluated_at").iter_rows(named=True):
        link = (
            f'<a href="{html.escape(os.path.relpath(r["card"], root))}">card</a>'
            if r["card"]
            else "no card"
        )
        if r["regressed"]:
            mark = (
                '<span class="regression" style="color:#a00;font-weight:bold">'
                f"significant regression: {html.escape(', '.join(r['regressed']))}</span>"
            )
        elif r["compared"]:
            mark = "no significant regression"
        else:
            mark = "not compared"
        budget = r["budget_steps"] or "full grid"
        cells = [r["family"], r["model"], link, r["against"] or "", mark, budget]
        body.append([c if i in (2, 4) else html.escape(str(c)) for i, c in enumerate(cells)])
    head = ["family", "release", "card", "against", "vs previous release", "budget"]
    return (
        '<section id="releases"><h2>Releases</h2><p>Each release against the previous release '
        "of its family (paired tests on the same prompts; a regression is a pooled verdict "
        "b_worse, Holm-adjusted). Budget: the budgets a release ran at under a budgeted "
        "watch, each with its cells and the axes whose verdict stayed undecided there.</p>"
        f"{plain_table(head, body)}</section>"
    )


def write_leaderboard(registry: Registry) -> tuple[Path, Path | None]:
    entries = registry.entries()
    frame = pl.DataFrame(leaderboard_rows(entries), schema=LEADERBOARD)
    table = write_parquet(frame, registry.root / LEADERBOARD_FILE, LEADERBOARD)
    runs = sorted({Path(e.run_dir) for e in entries if (Path(e.run_dir) / MANIFEST_FILE).exists()})
    if not runs:
        return table, None
    page = compare_runs(runs, preamble=releases_section(frame, registry.root))
    return table, write_text(page, registry.root / LEADERBOARD_PAGE)
