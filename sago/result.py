"""A finished run as a Python value: ``load(run)`` reads a run folder (or a run's URL on an
object store) into a ``RunResult`` whose tables are polars frames, read when first asked."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import polars as pl

from sago_core.artifacts.layout import (
    CARD_HTML_FILE,
    CARD_JSON_FILE,
    CARD_MD_FILE,
    FINISHED_RUN_FILES,
    INSTANCES_FILE,
    REPORT_FILE,
    SCORES_FILE,
    SUMMARY_FILE,
    SUMMARY_MD_FILE,
)
from sago_core.errors import InputError


def run_folder(run: Path | str) -> Path:
    """A local run folder for ``run``: the folder itself, or a store URL's run pulled into
    this machine's scratch folder (the store stays attached for what is written after).
    Every command's run-folder argument is read through here (``sago_cli.common``)."""
    from sago.flows.runtime.object_store import fetch_run_folder

    return fetch_run_folder(str(run))


def check_finished_run(run_dir: Path) -> None:
    """Refuse a folder that lacks a finished run's artifacts, naming what is missing."""
    missing = [name for name in FINISHED_RUN_FILES if not (run_dir / name).is_file()]
    if missing:
        raise InputError(f"is not a finished run (missing {', '.join(missing)})", file=str(run_dir))


@dataclass(frozen=True, eq=False)
class RunResult:
    """One finished run, read from its folder. The frames are read on first access and kept;
    ``instances`` is a lazy frame (scan it, filter, then collect)."""

    folder: Path

    @property
    def run_id(self) -> str:
        return self.folder.name

    @cached_property
    def summary(self) -> pl.DataFrame:
        """SGS per model, dataset and axis with its interval and tests (``summary.parquet``;
        the pooled row's dataset is ``__pooled__``)."""
        return pl.read_parquet(self.folder / SUMMARY_FILE)

    @cached_property
    def scores(self) -> pl.DataFrame:
        """Per-prompt scores: one row per model, dataset, prompt and axis (``scores.parquet``)."""
        return pl.read_parquet(self.folder / SCORES_FILE)

    @property
    def instances(self) -> pl.LazyFrame:
        """One row per variant with its deltas (``instances.parquet``), scanned lazily."""
        path = self.folder / INSTANCES_FILE
        if not path.is_file():
            raise InputError("does not exist (a run written before it was added)", file=str(path))
        return pl.scan_parquet(path)

    @property
    def verdicts(self) -> pl.DataFrame:
        """Per model, dataset and axis: ``above tolerance`` when the Holm-adjusted p-value of
        the run's reference test is below alpha (as the card says it), ``not shown above
        tolerance`` otherwise, null (with ``missing_reason``) where no test ran."""
        from sago_core.scoring.verdict import tolerance_verdict

        keep = ["model", "dataset", "axis", "sgs", "p_holm", "missing_reason"]
        table = self.summary.select(*keep)
        verdicts = [tolerance_verdict(p) for p in table["p_holm"].to_list()]
        return table.with_columns(pl.Series("verdict", verdicts, pl.String))

    @property
    def summary_text(self) -> str:
        """The run's summary as Markdown (``summary.md``), as ``sago run`` prints it."""
        return (self.folder / SUMMARY_MD_FILE).read_text(encoding="utf-8")

    @property
    def report(self) -> Path | None:
        """``report.html``, or None when the run has none."""
        path = self.folder / REPORT_FILE
        return path if path.is_file() else None

    @property
    def card(self) -> tuple[Path, ...]:
        """The stability card's files (``sago card`` writes them); empty before."""
        names = (CARD_MD_FILE, CARD_HTML_FILE, CARD_JSON_FILE)
        return tuple(p for p in (self.folder / n for n in names) if p.is_file())


def load(run: Path | str) -> RunResult:
    """A finished run: a run folder or its URL on an object store (``s3://bucket/runs/ID``)."""
    folder = run_folder(run)
    check_finished_run(folder)
    return RunResult(folder)
