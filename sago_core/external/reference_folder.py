"""A folder of the SAGO reference code's results -> one CSV in its aggregated layout.

``sago score --generations results/closed_models/`` reads every ``full_results_all_models.csv``
beneath the folder and writes them, row for row, into one file with the reference's own
aggregated columns (``style, dataset, run_path`` first, then the results' columns; folder
slugs rather than display labels), so one run scores every model, dataset and family: the
reader pools by model and dataset (a prompt's variants of every family beside its base
samples of every family) and keeps one run of each repeated (model, dataset, family).

The file is named after the folder and the sha256 of its content, so the same folder lands
in the same file (and ``sago score``'s run id, a hash of the file, repeats: a rerun resumes).
"""

from __future__ import annotations

import csv
import hashlib
import io
from dataclasses import dataclass
from pathlib import Path

from sago_core.artifacts.store import write_text
from sago_core.data.records import read_records
from sago_core.errors import InputError
from sago_core.external.columns import Record
from sago_core.external.options import ExternalSource
from sago_core.external.reference import runs_of
from sago_core.external.reference_layout import (
    FAMILY_SLUGS,
    RESULTS_FILE,
    family_of,
    parse_run_folder,
)
from sago_core.external.reference_runs import Duplicate, Run

LEADING = ("style", "dataset", "run_path")


@dataclass(frozen=True)
class PooledFolder:
    """The pooled file, what it holds, and the repeated runs the reader will leave out."""

    path: Path
    files: int
    runs: list[Run]  # the runs kept
    duplicates: list[Duplicate]

    def summary(self) -> str:
        models = sorted({r.model for r in self.runs})
        datasets = sorted({r.dataset for r in self.runs})
        families = sorted({f"{r.family}:{r.subtype}" for r in self.runs})
        return (
            f"{self.files} result files: {len(self.runs)} runs kept of {len(models)} models "
            f"({', '.join(models)}), {len(datasets)} datasets ({', '.join(datasets)}), "
            f"{len(families)} families ({', '.join(families)}); "
            f"{sum(len(d.left_out) for d in self.duplicates)} duplicate runs left out"
        )


def results_files(folder: Path) -> list[Path]:
    files = sorted(folder.rglob(RESULTS_FILE))
    if not files:
        raise InputError(
            f"holds no {RESULTS_FILE} beneath it (a folder is read as the SAGO reference "
            f"code's results: run_<model>_<dataset>_<family>_<stamp>/{RESULTS_FILE})",
            file=str(folder),
        )
    return files


def _style(file: Path) -> tuple[str, str | None]:
    """The run's family slug and dataset, from its folder's name (or the folder above)."""
    run, parent = file.parent.name, file.parent.parent.name
    parsed = parse_run_folder(run, parent)
    slug = parsed.family_slug if parsed else (run if family_of(run) else None)
    if slug is None:
        raise InputError(
            f"its folder {run!r} names no variation family: the reference code names it "
            f"run_<model>_<dataset>_<family>_<stamp> with a family of {', '.join(FAMILY_SLUGS)}",
            file=str(file),
        )
    return slug, parsed.dataset if parsed else None


def pooled_records(folder: Path) -> tuple[list[Record], int]:
    """Every results file's rows beneath ``folder`` with its style, dataset and run path."""
    records: list[Record] = []
    files = results_files(folder)
    for file in files:
        style, dataset = _style(file)
        run_path = file.resolve().parent.relative_to(folder.resolve().parent).as_posix()
        for record in read_records(file):
            rest = {k: v for k, v in record.items() if k not in LEADING}
            records.append({"style": style, "dataset": dataset or "", "run_path": run_path, **rest})
    return records, len(files)


def _csv(records: list[Record]) -> str:
    columns = list(dict.fromkeys(k for r in records for k in r))
    out = io.StringIO(newline="")
    writer = csv.DictWriter(out, columns, restval="", lineterminator="\n")
    writer.writeheader()
    writer.writerows(records)
    return out.getvalue()


def pool_folder(folder: Path, out_dir: Path, source: ExternalSource) -> PooledFolder:
    """Writes ``folder``'s results as one CSV under ``out_dir``; ``source``: the options the
    file will be read with (``--family`` overrides every run's)."""
    records, files = pooled_records(folder)
    text = _csv(records)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
    path = write_text(text, out_dir / f"{folder.resolve().name}-{digest}.csv")
    runs, duplicates = runs_of(records, source, str(path))
    return PooledFolder(path, files, runs, duplicates)
