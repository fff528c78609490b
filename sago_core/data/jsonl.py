"""JSON Lines as the JSON Lines format defines them: records separated by ``\\n`` (a ``\\r``
before it is part of the separator), and by nothing else.

``str.splitlines()`` also splits at U+2028, U+2029, U+0085, U+000B, U+000C, U+001C-U+001E, which
JSON allows unescaped inside a string; lm-evaluation-harness writes its samples with
``ensure_ascii=False``, so a model's answer holding one of them would be cut in two.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from sago_core.errors import InputError

Record = dict[str, Any]


def lines(text: str) -> Iterator[tuple[int, str]]:
    """(1-based line number, line) of each non-blank line; split on ``\\n`` only."""
    for number, line in enumerate(text.split("\n"), start=1):
        if line.endswith("\r"):
            line = line[:-1]
        if line.strip(" \t\r"):
            yield number, line


def numbered_records(text: str, file: str) -> Iterator[tuple[int, Record]]:
    """(line number, object) of each line; a line that is not a JSON object names its line."""
    for number, line in lines(text):
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"is not valid JSON: {exc.msg}", file=file, row=number) from exc
        if not isinstance(value, dict):
            raise InputError("is not a JSON object", file=file, row=number)
        yield number, value


def read_jsonl(text: str, file: str) -> list[Record]:
    """One object per line, in file order."""
    return [record for _, record in numbered_records(text, file)]
