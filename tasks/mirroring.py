"""Task: response mirroring, by rule detectors or (register pairs) the LLM judge.

Its own module: only this task depends on the API backend code, so editing a backend never
invalidates the cached pair scores, deltas or statistics.
"""

from __future__ import annotations

from pathlib import Path

from sago.tasks.backends import register_judge
from sago.tasks.stage import stage_task
from sago_core.artifacts.layout import MIRRORING_FILE
from sago_core.artifacts.schemas import MIRRORING
from sago_core.artifacts.store import read_parquet, write_parquet
from sago_core.backends.target import ModelTarget
from sago_core.stages.pairs import detect_mirroring_frame


@stage_task("detect-mirroring", run_name="detect-mirroring[{model}]")
def detect_mirroring_task(
    model: str,
    generations_path: str,
    out_dir: str,
    judge_batch_size: int,
    judge: ModelTarget | None = None,
    cache_dir: str | None = None,
    ledger_file: str | None = None,
) -> str:
    """Rule detectors, or the LLM judge for register pairs when ``judge`` is set (its
    target, identity and settings included, is then part of the cache key)."""
    register = None
    if judge is not None and cache_dir and ledger_file:
        register = register_judge(judge, cache_dir, ledger_file, judge_batch_size)
    frame = detect_mirroring_frame(read_parquet(generations_path), register)
    return str(write_parquet(frame, Path(out_dir) / MIRRORING_FILE, MIRRORING))
