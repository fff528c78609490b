"""Runs of the SAGO reference code and the choice among repeated ones.

A run is one model's rows of one results file (or, in the reference's aggregated CSV, of one
``run_path``): one model, one dataset, one variant family. The published tree repeats some
(model, dataset, family) triples, e.g. a one-prompt trial run beside the full run of the same
day. Pooling both would ask each prompt's variants twice, so one run of each triple is kept:
the most complete (the most rows with both answers), and among equally complete runs the
newest (the folder's stamp, then its name). Every repeat is reported with the run kept and
why.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import PurePath


@dataclass(frozen=True)
class Run:
    """One model's rows of one run; ``rows``: their indices in the records read."""

    source: str  # the run's folder (``run_path``) or file
    model: str
    dataset: str
    family: str
    subtype: str
    stamp: str  # YYYYMMDD_HHMMSS, "" when the name carries none
    answered: int  # rows with both a base and a variant answer
    rows: tuple[int, ...]

    @property
    def triple(self) -> tuple[str, str, str, str]:
        return self.model, self.dataset, self.family, self.subtype

    @property
    def name(self) -> str:
        path = PurePath(self.source)
        return path.parent.name if path.suffix else path.name


@dataclass(frozen=True)
class Duplicate:
    """Runs of one triple: the one kept, the others left out, and why."""

    kept: Run
    left_out: tuple[Run, ...]
    reason: str


def _rank(run: Run) -> tuple[int, str, str]:
    return run.answered, run.stamp, run.source


def choose_runs(runs: list[Run]) -> tuple[list[Run], list[Duplicate]]:
    """One run per (model, dataset, family, subtype), in the order given, and the repeats."""
    groups: dict[tuple[str, str, str, str], list[Run]] = defaultdict(list)
    for run in runs:
        groups[run.triple].append(run)
    kept: set[Run] = set()
    duplicates = []
    for group in groups.values():
        ordered = sorted(group, key=_rank, reverse=True)
        best, rest = ordered[0], tuple(ordered[1:])
        kept.add(best)
        if not rest:
            continue
        if best.answered > rest[0].answered:
            reason = f"the most complete ({best.answered} answered rows, next {rest[0].answered})"
        else:
            reason = f"as complete as another ({best.answered} answered rows) and the newest"
        duplicates.append(Duplicate(best, rest, reason))
    return [run for run in runs if run in kept], duplicates


def describe(duplicate: Duplicate) -> str:
    """One line: the triple, the run kept and why, the runs left out."""
    kept = duplicate.kept
    others = ", ".join(f"{r.name} ({r.answered} rows)" for r in duplicate.left_out)
    return (
        f"duplicate runs of {kept.model} / {kept.dataset} / {kept.family}:{kept.subtype}: kept "
        f"{kept.name}, {duplicate.reason}; left out {others}"
    )
