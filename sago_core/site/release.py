"""A release: one model of one run, a point on one of its family's trend lines, with the
times it can be ordered by (``series`` says which line and which time) and its paired
verdicts against the release before it (from the run's card)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

RELEASED, WATCHED, STARTED, WRITTEN = "released", "watched", "started", "written"


@dataclass(frozen=True)
class Release:
    """One model of one run, in its family's trend."""

    family: str
    spec: str
    identity: str | None
    run_id: str
    times: dict[str, float]  # RELEASED/WATCHED/STARTED/WRITTEN -> seconds since the epoch
    against_run: str | None = None  # the run of the release its card compares with
    against_spec: str | None = None
    verdicts: dict[str, dict[str, Any]] = field(default_factory=dict)  # axis -> paired row
    note: str | None = None  # why there is no paired verdict, as the card says

    @property
    def regressions(self) -> list[str]:
        return [axis for axis, row in self.verdicts.items() if row.get("verdict") == "b_worse"]
