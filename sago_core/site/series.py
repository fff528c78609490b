"""Which releases one trend line of the results site may join, and in what order.

A line joins releases of one model family whose runs ``sago compare --paired`` would pair:
the same BERTScore encoder (``scoring.encoder.differing``), the same design (variant grid,
decoding, sampling, scorer, seed: ``config.saved.check_designs``) and the same prompts
with the same texts (``check_prompts``). A release the first line of its family refuses
starts or joins another line, shown apart with the reason the comparison gives. Drawing two
designs on one line would show a change of settings as a change of the model.

A line is ordered by the releases themselves where they say when they were made: a date in
the model's name or identity (``gpt-4o-mini-2024-07-18``); else when the watch first
evaluated each; else when each run first started (the manifest's ``started_at``, which a
rerun keeps). A line uses the first of these all its releases have, and its legend says
which. Never a file's modification time; the manifest's ``written_at`` (moved by every
rerun) only for runs that predate ``started_at``, and then the legend says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from sago_core.artifacts.layout import PROMPTS_FILE, SCORES_FILE
from sago_core.config.saved import check_designs, read_run_config
from sago_core.errors import SagoError
from sago_core.scoring.encoder import differing, run_encoder
from sago_core.site.release import RELEASED, STARTED, WATCHED, WRITTEN, Release
from sago_core.statistics.paired_runs import check_prompts

# The order's bases, the release's own first, with what a line's legend says of each.
BASES = {
    RELEASED: "the release date in each model's name",
    WATCHED: "when the watch first evaluated each release",
    STARTED: "when each run first started (the manifest's started_at)",
    WRITTEN: "when each run's manifest was last written: no start time recorded, a rerun moves it",
}
_DATE = re.compile(r"(?<!\d)(20\d\d)[-_.]?(0[1-9]|1[0-2])[-_.]?(0[1-9]|[12]\d|3[01])(?!\d)")
_CLI_HINT = re.compile(r" \(pass --[^)]* anyway\)")


def name_date(spec: str, identity: str | None) -> float | None:
    """A release date written into the model's name or served identity (midnight UTC)."""
    for text in (spec, identity or ""):
        found = _DATE.search(text)
        if found:
            year, month, day = (int(part) for part in found.groups())
            return datetime(year, month, day, tzinfo=UTC).timestamp()
    return None


@dataclass(frozen=True)
class Series:
    """One trend line: releases of one family and one design, in release order."""

    family: str
    number: int  # 1, 2, ... within the family
    releases: list[Release]
    basis: str  # a key of BASES: what orders the line
    apart: str | None = None  # why the family's first line refuses these releases

    @property
    def legend(self) -> str:
        return f"ordered by {BASES[self.basis]}"


class DesignCheck:
    """Whether two releases may share a line: ``compare --paired``'s refusal, or None."""

    def __init__(self, folders: dict[str, Path]) -> None:
        self.folders = folders
        self._scores: dict[str, pl.DataFrame] = {}

    def _scores_of(self, run_id: str) -> pl.DataFrame:
        if run_id not in self._scores:
            path = self.folders[run_id] / SCORES_FILE
            self._scores[run_id] = pl.read_parquet(path, columns=["model", "dataset", "prompt_id"])
        return self._scores[run_id]

    def refusal(self, a: Release, b: Release) -> str | None:
        run_a, run_b = self.folders[a.run_id], self.folders[b.run_id]
        for run in (run_a, run_b):
            for name in (SCORES_FILE, PROMPTS_FILE):
                if not (run / name).is_file():
                    return f"run {run.name} has no {name}: its prompts cannot be matched"
        encoders = differing([(run.name, run_encoder(run)) for run in (run_a, run_b)])
        if encoders:  # as `sago compare` refuses them (sago_cli/compare.py)
            return encoders
        try:
            check_designs(read_run_config(run_a), read_run_config(run_b))
            scores_a, scores_b = self._scores_of(a.run_id), self._scores_of(b.run_id)
            check_prompts(run_a, run_b, scores_a, scores_b, [(a.spec, b.spec)])
        except SagoError as refused:
            return _CLI_HINT.sub("", str(refused))
        return None


def _first_known(release: Release) -> tuple[float, str, str]:
    at = next((release.times[b] for b in BASES if b in release.times), 0.0)
    return (at, release.run_id, release.spec)


def _ordered(family: str, number: int, members: list[Release], apart: str | None) -> Series:
    basis = next((b for b in BASES if all(b in r.times for r in members)), WRITTEN)
    ordered = sorted(members, key=lambda r: (r.times.get(basis, 0.0), r.run_id, r.spec))
    return Series(family, number, ordered, basis, apart)


def group_series(releases: list[Release], folders: dict[str, Path]) -> list[Series]:
    """Every family's lines: a release joins the first line whose first release its design
    matches, else starts one; families by name, lines by their first release."""
    check = DesignCheck(folders)
    out: list[Series] = []
    for family in sorted({r.family for r in releases}):
        lines: list[list[Release]] = []
        reasons: list[str | None] = []
        for release in sorted((r for r in releases if r.family == family), key=_first_known):
            refusals = [check.refusal(line[0], release) for line in lines]
            if None in refusals:
                lines[refusals.index(None)].append(release)
            else:
                lines.append([release])
                reasons.append(refusals[0] if refusals else None)
        out += [
            _ordered(family, i + 1, line, reason)
            for i, (line, reason) in enumerate(zip(lines, reasons, strict=True))
        ]
    return out
