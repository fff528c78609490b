"""Task: render report.html from the run's artifacts (cached on their content)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sago.tasks.stage import stage_task
from sago_core.artifacts.layout import GENERATIONS_FILE, REPORT_FILE, VARIANTS_FILE
from sago_core.artifacts.store import read_parquet, read_text, write_text
from sago_core.report.page.html import read_analysis, read_for_report, render_report
from sago_core.report.sections.insights import read_insights
from sago_core.report.sections.locate import read_located
from sago_core.report.sections.refusal_tables import read_refusal


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
    instances_path: str | None = None,
    tails_path: str | None = None,
    axis_structure_path: str | None = None,
    axis_pca_path: str | None = None,
    layer_profiles_path: str | None = None,
    patching_path: str | None = None,
    peer_metrics_path: str | None = None,
    sampling_tests_path: str | None = None,
    variance_components_path: str | None = None,
    budget_path: str | None = None,
    budget_estimates_path: str | None = None,
    refusal_path: str | None = None,
) -> str:
    """``analysis_paths``: every model's analysis.parquet (the per-layer curves); the
    instances, tails and axis-structure paths add the beyond-the-mean sections; the layer
    profiles and patching paths the where-the-instability-sits section; the peer metrics
    path the peer indices beside SGS; at K > 1 samples the sampling tests and variance
    components paths the stability-under-sampling section; a budgeted run's budget.json and
    budget_estimates.parquet its budget line and section; the refusal stage's refusal.json
    the refusal section's tables (every sample at K > 1). Of generations, variants and
    analysis only the columns the report uses are read (``html.REPORT_COLUMNS``)."""
    page = render_report(
        read_parquet(summary_path),
        read_parquet(scores_path),
        read_parquet(deltas_path),
        read_for_report(variants_path, VARIANTS_FILE),
        read_parquet(prompts_path),
        read_for_report(generations_path, GENERATIONS_FILE),
        provenance,
        analysis=read_analysis(analysis_paths) if analysis_paths else None,
        insights=read_insights(instances_path, tails_path, axis_structure_path, axis_pca_path),
        located=read_located(layer_profiles_path, patching_path),
        peer_metrics=read_parquet(peer_metrics_path) if peer_metrics_path else None,
        sampling_tests=read_parquet(sampling_tests_path) if sampling_tests_path else None,
        variance_components=(
            read_parquet(variance_components_path) if variance_components_path else None
        ),
        budget=(
            (json.loads(read_text(budget_path)), read_parquet(budget_estimates_path))
            if budget_path and budget_estimates_path
            else None
        ),
        refusal=read_refusal(refusal_path) if refusal_path else None,
    )
    return str(write_text(page, Path(out_dir) / REPORT_FILE))
