"""Tasks of ``sago score``: read and validate the external file, then derive the artifacts
``sago run`` writes (prompts, variants, per-model generations, the unmeasured analysis)."""

from __future__ import annotations

import json
from pathlib import Path

from sago.tasks.backends import backend_for
from sago.tasks.stage import stage_task
from sago_core.artifacts.layout import (
    ANALYSIS_FILE,
    EXTERNAL_ROWS_FILE,
    GENERATIONS_FILE,
    PROMPTS_FILE,
    VARIANTS_FILE,
)
from sago_core.artifacts.schemas import (
    ANALYSIS,
    EXTERNAL_ROWS,
    PROMPTS,
    VARIANTS,
    paired_generations_schema,
)
from sago_core.artifacts.store import read_parquet, sha256_of, write_parquet, write_text
from sago_core.backends.target import ModelTarget
from sago_core.external.frames import (
    model_generations,
    prompts_frame,
    rows_frame,
    unmeasured_analysis,
    variants_frame,
)
from sago_core.external.options import ExternalSource
from sago_core.external.read import read_external
from sago_core.storage.attached import ensure_local

NOTES_SUFFIX = ".notes.json"


@stage_task("read-external")
def read_external_task(source: ExternalSource, source_path: str, out_dir: str) -> str:
    """Validated rows of the file (``source_path``: its bytes key the cache); the reader's
    counts (prompts with several base answers, ...) beside them as JSON."""
    table = read_external(source)
    name = Path(source_path).name
    frame = rows_frame(table.rows, name, sha256_of(source_path))
    path = write_parquet(frame, Path(out_dir) / EXTERNAL_ROWS_FILE, EXTERNAL_ROWS)
    notes = {"format": table.format, **table.notes}
    write_text(json.dumps(notes, sort_keys=True), path.with_name(path.name + NOTES_SUFFIX))
    return str(path)


@stage_task("external-prompts")
def external_prompts_task(rows_path: str, out_dir: str) -> str:
    frame = prompts_frame(read_parquet(rows_path))
    return str(write_parquet(frame, Path(out_dir) / PROMPTS_FILE, PROMPTS))


@stage_task("external-variants")
def external_variants_task(rows_path: str, out_dir: str) -> str:
    frame = variants_frame(read_parquet(rows_path))
    return str(write_parquet(frame, Path(out_dir) / VARIANTS_FILE, VARIANTS))


@stage_task("external-generations", run_name="external-generations[{model}]")
def external_generations_task(
    model: str,
    rows_path: str,
    target: ModelTarget | None,
    out_dir: str,
    cache_dir: str | None = None,
    ledger_file: str | None = None,
) -> str:
    """One model's rows; with a scoring ``target``, base responses without token ids are
    tokenised once by it."""
    encode = backend_for(target, cache_dir, ledger_file).encode_response if target else None
    frame = model_generations(
        read_parquet(rows_path), model, encode, target.spec if target else None
    )
    return str(write_parquet(frame, Path(out_dir) / GENERATIONS_FILE, paired_generations_schema()))


@stage_task("unmeasured-analysis", run_name="unmeasured-analysis[{model}]")
def unmeasured_analysis_task(model: str, generations_path: str, out_dir: str) -> str:
    frame = unmeasured_analysis(read_parquet(generations_path))
    return str(write_parquet(frame, Path(out_dir) / ANALYSIS_FILE, ANALYSIS))


def read_notes(rows_path: str) -> dict[str, int | str]:
    notes = Path(rows_path + NOTES_SUFFIX)
    return json.loads(notes.read_text("utf-8")) if ensure_local(notes) else {}
