"""One step of a release's evaluation under a budget, as the watch records it (the registry
entry's ``budget_steps``) and shows it (``registry.parquet``, the leaderboard's releases
table): the budget, the run, the cells it asked, the run of the last release it was compared
with, the pooled paired verdict per watched axis, the level it was read at (the ladder
spends its alpha over the rungs, ``escalation.py``) and which of them stayed undecided."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Step:
    budget: str  # "20%", "1,600 cells" or "full grid"
    run_dir: str
    cells: int | None  # cells asked (the full grid's for a full run); None: unreadable
    full_cells: int | None
    against: str | None = None  # the last release's run it was compared with
    verdicts: dict[str, str | None] = field(default_factory=dict)  # axis -> pooled verdict
    undecided: tuple[str, ...] = ()  # watched axes without a verdict or inconclusive
    design: str | None = None  # the paired comparison's design line
    note: str | None = None  # why there is no verdict
    baseline: str | None = None  # the full run whose cells were the control variate
    alpha: float | None = None  # the level its verdicts were read at (the ladder's share)

    def record(self) -> dict[str, Any]:
        return {**asdict(self), "undecided": list(self.undecided)}

    def describe(self) -> str:
        return describe_step(self.record())


def _cells(step: dict[str, Any]) -> str:
    cells, full = step.get("cells"), step.get("full_cells")
    if cells is None:
        return "cells unknown"
    return f"{cells:,} of {full:,} cells" if full else f"{cells:,} cells"


def describe_step(step: dict[str, Any]) -> str:
    """``20% (778 of 3,888 cells): undecided on bleu, mr``."""
    head = f"{step['budget']} ({_cells(step)})"
    if step.get("note"):
        return f"{head}: {step['note']}"
    alpha = step.get("alpha")
    at = f" at {alpha:.3g}" if alpha else ""
    undecided = step.get("undecided") or []
    if undecided:
        return f"{head}: undecided{at} on {', '.join(undecided)}"
    verdicts = step.get("verdicts") or {}
    found = sorted({v for v in verdicts.values() if v})
    return f"{head}: decided{at} ({', '.join(found)})" if found else f"{head}: decided{at}"


def describe_steps(steps: list[dict[str, Any]] | tuple[dict[str, Any], ...]) -> str | None:
    """The steps in order, ``" -> "`` between them (None: the release ran unbudgeted)."""
    return " -> ".join(describe_step(s) for s in steps) if steps else None
