"""The stability card's budget line: a budgeted run's card says how many of the grid's
cells it asked and why it stopped, and that its SGS are design-based estimates. A full-grid
run has no budget.json: its card holds no budget key, so its card.json is what it was."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sago_core.artifacts.layout import BUDGET_FILE
from sago_core.budget.record import budget_line

Block = tuple[str, list[str], list[list[str]], list[str]]  # report/card/render.py's block


def budget_card(run_dir: Path) -> dict[str, Any]:
    """``{"budget": {...}}`` for the card, or ``{}`` for a full-grid run."""
    path = run_dir / BUDGET_FILE
    if not path.exists():
        return {}
    record = json.loads(path.read_text(encoding="utf-8"))
    keys = ("cells", "full_cells", "share", "rounds_run", "rounds_planned", "stop_reason")
    return {"budget": {**{k: record[k] for k in keys}, "line": budget_line(record)}}


def budget_blocks(card: dict[str, Any]) -> list[Block]:
    budget = card.get("budget")
    if not budget:
        return []
    note = (
        "SGS and per-prompt scores are design-based estimates of the full grid's (the "
        "report's budgeted-design section gives their intervals)."
    )
    return [("Budgeted run", [], [], [budget["line"] + ".", note])]
