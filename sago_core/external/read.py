"""Read a file of external generations in any supported format into validated rows of the
input schema. The file's kind (zip, Parquet, JSON, JSON Lines, CSV) is told from its bytes
(``sniff``), its format from its content: the zip of an inspect_ai ``.eval`` log, else the
records' columns. Without ``--format`` the detected format is read; a ``--format`` the file
does not fit is refused in one line that says what the file is and which format reads it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sago_core.errors import InputError
from sago_core.external import dove, inspect_log, lmeval, reference
from sago_core.external.columns import Record, apply_mapping
from sago_core.external.options import ExternalSource, FormatName
from sago_core.external.schema import COLUMNS, REQUIRED, ExternalRow
from sago_core.external.sniff import KIND_NAMES, load
from sago_core.external.validate import validate_records

INSPECT: FormatName = "inspect"
DESCRIPTIONS: dict[FormatName, str] = {
    "generations": "a file in sago's input schema",
    "sago-reference": "a SAGO reference results CSV",
    "dove": "a DOVE file",
    "lm-eval": "an lm-evaluation-harness samples log",
    "inspect": "an inspect_ai log",
}


@dataclass(frozen=True)
class ExternalTable:
    rows: list[ExternalRow]
    format: FormatName
    notes: dict[str, int] = field(default_factory=dict)  # counts the report shows


def fits(fmt: FormatName, records: list[Record]) -> bool:
    """Whether the records carry ``fmt``'s own columns (its signature)."""
    present = set().union(*(r.keys() for r in records[:50]))
    if fmt == "generations":
        return set(REQUIRED) <= present
    if fmt == "sago-reference":
        return set(reference.REQUIRED) <= present
    if fmt == "dove":
        return set(dove.REQUIRED) <= present or dove.is_lite(present)
    if fmt == "lm-eval":
        return set(lmeval.REQUIRED) <= present
    return all(inspect_log.is_log(r) for r in records[:50])


def detect_format(records: list[Record]) -> FormatName | None:
    return next((f for f in DESCRIPTIONS if fits(f, records)), None)


def _no_format(records: list[Record], file: str) -> InputError:
    present = set().union(*(r.keys() for r in records[:50]))
    return InputError(
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
    content = load(path)
    records = content.records
    if not records:
        raise InputError(f"holds no rows ({KIND_NAMES[content.kind]})", file=file)
    if source.format == "generations" or (source.format is None and source.columns):
        records = apply_mapping(records, source.columns, COLUMNS, file)
    found: FormatName | None = INSPECT if content.kind == "zip" else detect_format(records)
    chosen = source.format or found
    if chosen is None:
        raise _no_format(records, file)
    if found is not None and chosen != found and not fits(chosen, records):
        what = "an inspect_ai .eval log" if content.kind == "zip" else DESCRIPTIONS[found]
        raise InputError(f"this is {what}: use --format {found} (or leave --format out)", file=file)
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
