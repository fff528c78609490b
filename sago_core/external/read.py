"""Read a file of external generations in any supported format, detected from its columns
when ``--format`` is not given, into validated rows of the input schema."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sago_core.data.records import read_records
from sago_core.errors import InputError
from sago_core.external import dove, inspect_log, lmeval, reference
from sago_core.external.columns import Record, apply_mapping
from sago_core.external.options import ExternalSource, FormatName
from sago_core.external.schema import COLUMNS, REQUIRED, ExternalRow
from sago_core.external.validate import validate_records

SUFFIXES = (".csv", ".json", ".jsonl", ".parquet", ".eval")
INSPECT: FormatName = "inspect"


@dataclass(frozen=True)
class ExternalTable:
    rows: list[ExternalRow]
    format: FormatName
    notes: dict[str, int] = field(default_factory=dict)  # counts the report shows


def detect_format(records: list[Record], file: str) -> FormatName:
    present = set().union(*(r.keys() for r in records[:50]))
    if set(REQUIRED) <= present:
        return "generations"
    if set(reference.REQUIRED) <= present:
        return "sago-reference"
    if set(dove.REQUIRED) <= present or dove.is_lite(present):
        return "dove"
    if set(lmeval.REQUIRED) <= present:
        return "lm-eval"
    if all(inspect_log.is_log(r) for r in records[:50]):
        return INSPECT
    raise InputError(
        f"columns {sorted(present)} match no known format: the input schema needs "
        f"{list(REQUIRED)} (or map yours with --columns), the SAGO reference CSVs "
        f"{list(reference.REQUIRED)}, DOVE {list(dove.REQUIRED)} or DOVE_Lite "
        f"{list(dove.LITE_REQUIRED)} with 'dimensions_<n>: <name>' columns, lm-eval samples "
        f"{list(lmeval.REQUIRED)}, inspect_ai logs {list(inspect_log.REQUIRED)}",
        file=file,
    )


def read_external(source: ExternalSource) -> ExternalTable:
    path = Path(source.path)
    file = str(path)
    if path.suffix.lower() not in SUFFIXES:
        raise InputError(
            f"unsupported file type {path.suffix!r} (use .csv, .json, .jsonl, .parquet or .eval)",
            file=file,
        )
    logs = inspect_log.load_logs(path) if source.format in (None, INSPECT) else None
    records = logs if logs is not None else read_records(path)
    if not records:
        raise InputError("holds no rows", file=file)
    if source.format == "generations" or (source.format is None and source.columns):
        records = apply_mapping(records, source.columns, COLUMNS, file)
    chosen: FormatName = source.format or (INSPECT if logs else detect_format(records, file))
    if chosen == "sago-reference":
        records, notes = reference.to_input_schema(records, source, file)
    elif chosen == "dove":
        records, notes = dove.to_input_schema(records, source, file)
    elif chosen == "lm-eval":
        records, notes = lmeval.to_input_schema(records, source, file)
    elif chosen == INSPECT:
        records, notes = inspect_log.to_input_schema(records, source, file)
    else:
        notes = {}
    rows = validate_records(records, file, source.model, source.max_prompt_chars)
    return ExternalTable(rows, chosen, notes)
