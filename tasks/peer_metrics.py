"""Task: peer_metrics.parquet, the peers' prompt-sensitivity indices."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from sago.tasks.stage import stage_task
from sago_core.artifacts.layout import PEER_METRICS_FILE
from sago_core.artifacts.schemas import PEER_METRICS
from sago_core.artifacts.store import read_parquet, write_parquet
from sago_core.peer_metrics.table import peer_metrics


@stage_task("peer-metrics")
def peer_metrics_task(
    instances_path: str,
    deltas_path: str,
    analysis_paths: list[str],
    out_dir: str,
    sample_analysis_paths: list[str] | None = None,
    posix_matrix_paths: list[str] | None = None,
) -> str:
    """``analysis_paths``: every model's analysis.parquet (POSIX's base column reads its
    log-probs); at K > 1 ``sample_analysis_paths``, every model's sample_analysis.parquet,
    replace them. ``posix_matrix_paths``: every model's posix_matrix.parquet (POSIX's full
    matrix, ``RunConfig.posix_matrix``); without them ``posix`` is NA with the reason."""
    parts = [read_parquet(p) for p in sample_analysis_paths or analysis_paths]
    analysis = pl.concat(parts, how="diagonal_relaxed") if parts else None
    matrices = [read_parquet(p) for p in posix_matrix_paths or []]
    matrix = pl.concat(matrices) if matrices else None
    frame = peer_metrics(
        read_parquet(instances_path), read_parquet(deltas_path), analysis, posix_matrix=matrix
    )
    return str(write_parquet(frame, Path(out_dir) / PEER_METRICS_FILE, PEER_METRICS))
