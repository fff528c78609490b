"""Task: render report.html from the run's artifacts (cached on their content)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sago_core.artifacts.layout import REPORT_FILE
from sago_core.artifacts.store import read_parquet, write_text
from sago_core.report.html import read_analysis, render_report
from tasks.stage import stage_task


@stage_task("render-report")
def render_report_task(
    summary_path: str,
    scores_path: str,
    deltas_path: str,
    variants_path: str,
    prompts_path: str,
    generations_path: str,
    provenance: dict[str, Any],
    out_dir: str,
    analysis_paths: list[str] | None = None,
) -> str:
    """``analysis_paths``: every model's analysis.parquet (the per-layer curves)."""
    page = render_report(
        read_parquet(summary_path),
        read_parquet(scores_path),
        read_parquet(deltas_path),
        read_parquet(variants_path),
        read_parquet(prompts_path),
        read_parquet(generations_path),
        provenance,
        analysis=read_analysis(analysis_paths) if analysis_paths else None,
    )
    return str(write_text(page, Path(out_dir) / REPORT_FILE))
