"""What a file of external generations is, told from its bytes, never from its name: a zip
archive (inspect_ai's ``.eval`` log), Parquet, a JSON document, JSON Lines or CSV; and its
records, read the way that kind is read.

The name only breaks a tie (a file whose single line is one JSON object is JSON Lines when
it is called ``.jsonl``, a JSON document otherwise) and backs a claim (a ``.eval`` file that
is no zip is refused as such).
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from sago_core.data.jsonl import read_jsonl
from sago_core.data.records import read_parquet_records
from sago_core.errors import InputError
from sago_core.external import inspect_log

Kind = Literal["zip", "parquet", "json", "jsonl", "csv"]
Record = dict[str, Any]

ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")  # a zip's first entry, or an empty zip's end record
PARQUET_MAGIC = b"PAR1"
GZIP_MAGIC = b"\x1f\x8b"
KIND_NAMES: dict[Kind, str] = {
    "zip": "a zip archive",
    "parquet": "a Parquet file",
    "json": "a JSON document",
    "jsonl": "a JSON Lines file",
    "csv": "a CSV file",
}


@dataclass(frozen=True)
class Content:
    kind: Kind
    records: list[Record]  # an ``.eval`` archive: its one EvalLog record


def _bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError as exc:
        raise InputError("does not exist", file=str(path)) from exc
    except IsADirectoryError as exc:
        raise InputError("is a folder, not a file", file=str(path)) from exc


def _text(raw: bytes, file: str) -> str:
    if raw.startswith(GZIP_MAGIC):
        raise InputError("is gzip-compressed: decompress it first (gunzip)", file=file)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputError(
            f"is no zip, Parquet, JSON, JSON Lines or CSV file: not valid UTF-8 "
            f"(byte {exc.start}, line {line})",
            file=file,
        ) from exc


def _text_kind(text: str, path: Path) -> Kind:
    head = text.lstrip()
    if head.startswith("["):
        return "json"
    if not head.startswith("{"):
        return "csv"
    if path.suffix.lower() == ".jsonl":
        return "jsonl"
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return "jsonl"  # several values: one a line
    return "json"


def _json(text: str, file: str) -> list[Record]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"is not valid JSON: {exc}", file=file) from exc
    if inspect_log.is_log(value):
        return [value]
    if isinstance(value, dict) and isinstance(value.get("Data"), list):
        value = value["Data"]  # the official TriviaQA layout
    if not isinstance(value, list):
        raise InputError(
            "holds one JSON object that is no inspect_ai log: give a JSON array of records",
            file=file,
        )
    for number, item in enumerate(value, start=1):
        if not isinstance(item, dict):
            raise InputError("is not a JSON object", file=file, row=number)
    return value


def load(path: Path) -> Content:
    """The file's kind and records."""
    file = str(path)
    raw = _bytes(path)
    if raw.startswith(ZIP_MAGIC):
        return Content("zip", [inspect_log.read_archive(path)])
    if path.suffix.lower() == ".eval":
        raise InputError("is not a zip archive, as an inspect_ai .eval log is", file=file)
    if raw.startswith(PARQUET_MAGIC):
        return Content("parquet", read_parquet_records(path))
    text = _text(raw, file)
    kind = _text_kind(text, path)
    if kind == "json":
        return Content(kind, _json(text, file))
    if kind == "jsonl":
        return Content(kind, read_jsonl(text, file))
    return Content(kind, list(csv.DictReader(io.StringIO(text, newline=""))))
