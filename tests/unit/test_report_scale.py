"""report.html at a few thousand instances stays under the size its module documents
(``html.html_size_bound``): figures aggregate, the explorer embeds each variant once,
compressed. The run is bench/report_scale.py's synthetic one (the artifacts' exact schemas,
paper-like texts); the size is deterministic, so the bound is asserted exactly."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from bench.report_scale import build_run
from sago_core.artifacts.layout import (
    DELTAS_FILE,
    GENERATIONS_FILE,
    INSTANCES_FILE,
    PROMPTS_FILE,
    REPORT_FILE,
    VARIANTS_FILE,
)
from sago_core.artifacts.schemas import instances_schema
from sago_core.artifacts.store import write_parquet, write_text
from sago_core.report.page.html import (
    HTML_FIXED_BYTES,
    REPORT_COLUMNS,
    html_size_bound,
    read_for_report,
    report_from_run,
)
from sago_core.stages.instances import build_instances

INSTANCES = 2_500


def test_the_report_of_a_few_thousand_instances_stays_under_its_documented_size(
    tmp_path: Path,
) -> None:
    run_dir = build_run(tmp_path / "run", INSTANCES)
    instances = build_instances(
        *(pl.read_parquet(run_dir / n) for n in (DELTAS_FILE, GENERATIONS_FILE, PROMPTS_FILE))
    )
    write_parquet(instances, run_dir / INSTANCES_FILE, instances_schema())
    page = report_from_run(run_dir)
    size = len(write_text(page, run_dir / REPORT_FILE).read_bytes())

    assert len(instances) > 2_000
    assert f"All {len(instances)} variants of the run" in page  # every variant embedded
    assert size > HTML_FIXED_BYTES // 2  # figures and explorer are there
    assert size <= html_size_bound(len(instances)), (
        f"report.html of {len(instances)} instances is {size:,} bytes, over its documented "
        f"bound {html_size_bound(len(instances)):,}"
    )


def test_the_report_reads_only_its_columns_of_the_large_artifacts(tmp_path: Path) -> None:
    run_dir = build_run(tmp_path / "run", 100)
    generations = read_for_report(run_dir / GENERATIONS_FILE, GENERATIONS_FILE)
    variants = read_for_report(run_dir / VARIANTS_FILE, VARIANTS_FILE)
    assert "prompt_text" not in generations.columns
    assert "response_token_ids" not in generations.columns
    assert generations.columns == list(REPORT_COLUMNS[GENERATIONS_FILE])
    assert variants.columns == ["family", "kept"]
    # an artifact written before a column existed is read without it
    old = run_dir / "old_generations.parquet"
    pl.read_parquet(run_dir / GENERATIONS_FILE).drop("answer_text", "engine").write_parquet(old)
    assert "answer_text" not in read_for_report(old, GENERATIONS_FILE).columns
