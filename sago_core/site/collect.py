"""What the results site shows, read from a runs folder (local, or the mirror of a store).

A run is a folder with ``manifest.json`` and ``summary.parquet``. A release is one model of
one run: a point in one of its family's trend lines (``series`` says which line and in what
order). Its times are every one known: a date in its name, the watch's ``evaluated_at``
when the watch's registry recorded it, the manifest's ``started_at`` and ``written_at``
(never a file's modification time); its family is the one the watch's leaderboard recorded,
else ``watch.releases.model_family``; its paired verdicts against the release before it
come from the run's ``card.json`` (rows whose ``model_b`` is this model).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from sago_core.artifacts.layout import (
    CARD_HTML_FILE,
    CARD_JSON_FILE,
    MANIFEST_FILE,
    PROMPTS_FILE,
    REPORT_FILE,
    RUN_CONFIG,
    SCORES_FILE,
    SUMMARY_FILE,
)
from sago_core.progress import each
from sago_core.site.release import Release
from sago_core.site.series import (
    RELEASED,
    STARTED,
    WATCHED,
    WRITTEN,
    Series,
    group_series,
    name_date,
)
from sago_core.storage import attached
from sago_core.storage.mirror import Mirror
from sago_core.vocabulary import POOLED
from sago_core.watch.leaderboard import LEADERBOARD_FILE, LEADERBOARD_PAGE
from sago_core.watch.registry import Entry, Registry
from sago_core.watch.releases import model_family

# What the site reads of a run: fetched from the store when the runs folder is on one
# (the config, scores and prompts: what decides whether two runs share one trend line).
SITE_INPUTS = (
    MANIFEST_FILE,
    SUMMARY_FILE,
    REPORT_FILE,
    CARD_JSON_FILE,
    CARD_HTML_FILE,
    RUN_CONFIG,
    SCORES_FILE,
    PROMPTS_FILE,
)

POOLED_COLUMNS = ("axis", "sgs", "ci_low", "ci_high", "n", "p_holm", "missing_reason")


@dataclass(frozen=True)
class SiteRun:
    run_id: str
    folder: Path
    written_at: str | None
    started_at: str | None  # when the run first started (a rerun keeps it)
    config_hash: str | None
    config: dict[str, Any]
    identities: dict[str, str | None]  # model spec -> weights' identity
    pooled: dict[str, list[dict[str, Any]]]  # model spec -> pooled rows, one per axis
    card: dict[str, Any] | None
    # paths of this machine its report and card quote (the scored file, the run compared
    # with): local_paths.py names them, never prints them
    quoted_paths: tuple[str, ...] = ()

    @property
    def has_report(self) -> bool:
        return (self.folder / REPORT_FILE).is_file()

    @property
    def has_card(self) -> bool:
        return (self.folder / CARD_HTML_FILE).is_file()


@dataclass(frozen=True)
class Site:
    root: Path
    runs: dict[str, SiteRun]  # by run id, oldest first
    releases: list[Release]  # by family, then series, then release order
    series: list[Series]  # by family, then series number
    leaderboard_page: Path | None  # the watch's comparison across every release

    def families(self) -> dict[str, list[Series]]:
        grouped: dict[str, list[Series]] = {}
        for series in self.series:
            grouped.setdefault(series.family, []).append(series)
        return grouped


def _timestamp(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def run_names(root: Path) -> list[str]:
    """Folders below ``root`` holding a manifest; on a store, as its listing says."""
    names = {p.parent.name for p in root.glob(f"*/{MANIFEST_FILE}")}
    mirror = attached.current()
    if isinstance(mirror, Mirror) and root.resolve() == mirror.root:
        for key in mirror.store.keys(""):
            parts = key.split("/")
            if len(parts) == 2 and parts[1] == MANIFEST_FILE:
                names.add(parts[0])
    return sorted(name for name in names if not name.startswith("."))


def read_run(folder: Path) -> SiteRun | None:
    """A finished run's facts (None: no manifest or no summary)."""
    for name in SITE_INPUTS:
        attached.ensure_local(folder / name)
    if not (folder / MANIFEST_FILE).is_file() or not (folder / SUMMARY_FILE).is_file():
        return None
    manifest = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
    summary = pl.read_parquet(folder / SUMMARY_FILE).filter(pl.col("dataset") == POOLED)
    pooled: dict[str, list[dict[str, Any]]] = {}
    for row in summary.iter_rows(named=True):
        pooled.setdefault(row["model"], []).append({c: row.get(c) for c in POOLED_COLUMNS})
    models = manifest.get("models") or {}
    card_file = folder / CARD_JSON_FILE
    card = json.loads(card_file.read_text(encoding="utf-8")) if card_file.is_file() else None
    return SiteRun(
        run_id=folder.name,
        folder=folder,
        written_at=manifest.get("written_at"),
        started_at=manifest.get("started_at"),
        config_hash=manifest.get("config_hash"),
        config=manifest.get("config") or {},
        identities={s: (models.get(s) or {}).get("identity") for s in sorted(pooled)},
        pooled=pooled,
        card=card,
        quoted_paths=_quoted_paths(manifest, card),
    )


def _quoted_paths(manifest: dict[str, Any], card: dict[str, Any] | None) -> tuple[str, ...]:
    """The scored file a run read and the folder of the run its card compared it with."""
    paired = (card or {}).get("paired") or {}
    found = [(manifest.get("external") or {}).get("file"), paired.get("against")]
    return tuple(str(path) for path in found if path)


def registry_entries(root: Path) -> list[Entry]:
    """The watch's registry entries (none outside a watch's runs folder)."""
    folder = Registry(root).folder
    attached.pull(folder)
    return [
        Entry(**json.loads(p.read_text(encoding="utf-8"))) for p in sorted(folder.glob("*.json"))
    ]


def recorded_families(root: Path) -> dict[tuple[str, str | None], str]:
    """(model, identity) -> family, as the watch's leaderboard recorded it."""
    path = root / LEADERBOARD_FILE
    attached.ensure_local(path)
    if not path.is_file():
        return {}
    board = pl.read_parquet(path).select("model", "identity", "family").unique()
    return {(r["model"], r["identity"]): r["family"] for r in board.iter_rows(named=True)}


def _paired(card: dict[str, Any] | None, spec: str) -> dict[str, Any]:
    """The release's paired verdicts and what it was compared with, from its card."""
    if card is None:
        return {}
    paired = card.get("paired")
    if not paired:
        return {"note": card.get("paired_note")}
    rows = [r for r in paired.get("rows") or [] if r.get("model_b") == spec]
    if not rows:
        return {}
    return {
        "against_run": Path(str(paired.get("against"))).name,
        "against_spec": rows[0].get("model_a"),
        "verdicts": {r["axis"]: r for r in rows},
    }


def read_site(root: Path) -> Site:
    names = run_names(root)
    runs = [run for name in each(names, len(names)) if (run := read_run(root / name)) is not None]
    runs.sort(key=lambda r: (_timestamp(r.started_at) or _timestamp(r.written_at) or 0, r.run_id))
    evaluated = {(Path(e.run_dir).name, e.spec): e.evaluated_at for e in registry_entries(root)}
    families = recorded_families(root)
    releases = []
    for run in runs:
        for spec, identity in run.identities.items():
            family = families.get((spec, identity)) or model_family(spec)
            known = {
                RELEASED: name_date(spec, identity),
                WATCHED: evaluated.get((run.run_id, spec)),
                STARTED: _timestamp(run.started_at),
                WRITTEN: _timestamp(run.written_at),
            }
            times = {basis: at for basis, at in known.items() if at is not None}
            releases.append(
                Release(family, spec, identity, run.run_id, times, **_paired(run.card, spec))
            )
    by_id = {run.run_id: run for run in runs}
    series = group_series(releases, {r: run.folder for r, run in by_id.items()})
    page = root / LEADERBOARD_PAGE
    attached.ensure_local(page)
    return Site(
        root=root,
        runs=by_id,
        releases=[release for line in series for release in line.releases],
        series=series,
        leaderboard_page=page if page.is_file() else None,
    )
