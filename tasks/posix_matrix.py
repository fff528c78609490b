"""Task: posix_matrix.parquet, POSIX's full matrix of one shard (``RunConfig.posix_matrix``).

A module of its own: a task's code version covers its module and everything it imports, so
the generate and analyse stages keep their cache keys.
"""

from __future__ import annotations

from pathlib import Path

from sago.tasks.backends import backend_for
from sago.tasks.stage import stage_task
from sago_core.artifacts.layout import POSIX_MATRIX_FILE
from sago_core.artifacts.schemas import POSIX_MATRIX
from sago_core.artifacts.store import read_parquet, write_parquet
from sago_core.backends.target import ModelTarget
from sago_core.config import AnalysisSettings, PosixMatrixSettings
from sago_core.stages.posix_matrix import posix_matrix


@stage_task("posix-matrix", run_name="posix-matrix[{model} | {shard}]")
def posix_matrix_task(
    model: str,
    shard: str,
    target: ModelTarget,
    generations_path: str,
    settings: PosixMatrixSettings,
    scoring: AnalysisSettings,
    seed: int,
    out_dir: str,
    cache_dir: str | None = None,
    ledger_file: str | None = None,
) -> str:
    """``scoring``: the analysis stage's batching (``analysis.scoring_pass()``); ``seed``:
    the run's, drawing the texts kept under the cap."""
    frame = posix_matrix(
        backend_for(target, cache_dir, ledger_file),
        read_parquet(generations_path),
        settings,
        scoring,
        seed,
    )
    return str(write_parquet(frame, Path(out_dir) / POSIX_MATRIX_FILE, POSIX_MATRIX))
