"""Task: peer_metrics.parquet, the peers' prompt-sensitivity indices (issue 30)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from sago_core.artifacts.layout import PEER_METRICS_FILE
from sago_core.artifacts.schemas import PEER_METRICS
from sago_core.artifacts.store import read_parquet, write_parquet
from sago_core.peer_metrics.table import peer_metrics
from tasks.stage import stage_task


@stage_task("peer-metrics")
def peer_metrics_task(
    instances_path: str,
    deltas_path: str,
    analysis_paths: list[str],
    out_dir: str,
    sample_analysis_paths: list[str] | None = None,
) -> str:
    """``analysis_paths``: every model's analysis.parquet (POSIX reads its log-probs); at
    K > 1 ``sample_analysis_paths``, every model's sample_analysis.parquet, replace them."""
    parts = [read_parquet(p) for p in sample_analysis_paths or analysis_paths]
    analysis = pl.concat(parts, how="diagonal_relaxed") if parts else None
    frame = peer_metrics(read_parquet(instances_path), read_parquet(deltas_path), analysis)
    return str(write_parquet(frame, Path(out_dir) / PEER_METRICS_FILE, PEER_METRICS))
