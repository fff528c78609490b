"""The refusal stage's tables read back for the report: refusal.json and the Parquet files it
names (``stages/refusal.py``'s ``TABLE_FILES``), beside it in the run folder.

The report shows these rather than judging the answers again, so at K > 1 samples it reads
what the stage judged over every sample (generations.parquet holds sample 0 alone).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sago_core.artifacts.layout import REFUSAL_FILE
from sago_core.artifacts.store import read_parquet, read_text
from sago_core.refusal.flips import split_rates
from sago_core.stages.refusal import TABLE_FILES, RefusalTables


def read_refusal(refusal_json: str | Path) -> RefusalTables | None:
    """The tables that ``refusal_json`` (a refusal.json) names, read from its folder; None
    when the run measured no refusal (its prompts carry no kind). A named file that is
    absent is an error naming it."""
    path = Path(refusal_json)
    record: dict[str, Any] = json.loads(read_text(path))
    if not record.get("measured"):
        return None
    frames = {}
    for name, file, schema in TABLE_FILES:
        table = path.with_name(file)
        try:
            frame = read_parquet(table)
            frame = split_rates(frame) if name == "rates" else frame  # older files too
            frames[name] = frame.cast(schema)  # type: ignore[arg-type]
        except FileNotFoundError as error:
            raise FileNotFoundError(
                f"{path}: names the refusal table {file}, which is not in {path.parent}"
            ) from error
    return RefusalTables(**frames, judge=record.get("judge"))


def refusal_from_run(run_dir: Path) -> RefusalTables | None:
    """A finished run folder's refusal tables; None when it has no refusal.json (a run from
    before the refusal stage) or measured no refusal."""
    path = run_dir / REFUSAL_FILE
    return read_refusal(path) if path.is_file() else None
