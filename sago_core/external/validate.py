"""Strict validation of rows in the input schema: every problem is an ``InputError`` naming
the file, the row (1-based data rows) and the column. An empty response is kept as missing
with its reason (``EMPTY_RESPONSE``), never scored as an empty answer, unless the file has a
``failure_reason`` column: then a row with a blank reason succeeded (its empty response is an
empty answer, as the run that wrote it scored it) and a row with a reason failed with it."""

from __future__ import annotations

import json
import math
from functools import partial
from typing import Any

from sago_core.errors import InputError
from sago_core.external.columns import Record, hint, require_columns
from sago_core.external.schema import (
    DEFAULT_MODEL,
    EMPTY_RESPONSE,
    PAIRED_BASE,
    POSITIONS,
    REQUIRED,
    ExternalRow,
    VariantKey,
    known_families,
    parse_variant_id,
)
from sago_core.vocabulary import BASE_VARIANT_ID, REPLAY_FAMILY, VARIANT_COLUMNS


def _blank(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and not value.strip()


def _text(record: Record, column: str, file: str, row: int, max_chars: int) -> str:
    bad = partial(InputError, file=file, row=row, column=column)
    value = record.get(column)
    if _blank(value):
        raise bad("is empty")
    if isinstance(value, int | float) and column in ("prompt_id", "dataset"):
        value = f"{value:g}" if isinstance(value, float) else str(value)
    if not isinstance(value, str):
        raise bad(f"must be text, got {type(value).__name__}")
    if "\x00" in value:
        raise bad("contains a NUL byte")
    if len(value) > max_chars:
        raise bad(f"is {len(value):,} characters long, over max_prompt_chars {max_chars:,}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise bad(f"holds a lone surrogate at character {exc.start}") from exc
    # A prompt is kept as asked (a noise variant's spaces are its point); ids are trimmed.
    return value if column == "prompt_text" else value.strip()


def _json_list(value: Any, file: str, row: int, column: str) -> list[Any] | None:
    bad = partial(InputError, file=file, row=row, column=column)
    if _blank(value):
        return None
    if isinstance(value, str):
        stripped = value.strip()
        if not stripped.startswith("["):
            return [stripped]
        try:
            value = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise bad(f"is not a JSON array: {exc.msg}") from exc
    if hasattr(value, "tolist"):
        value = value.tolist()
    if not isinstance(value, list | tuple):
        raise bad(f"must be a list, got {type(value).__name__}")
    return list(value)


def _token_ids(value: Any, file: str, row: int) -> tuple[int, ...] | None:
    column = "response_token_ids"
    items = _json_list(value, file, row, column)
    if items is None:
        return None
    ids = []
    for item in items:
        try:
            number = int(item)
        except (TypeError, ValueError) as exc:
            raise InputError(
                f"holds {item!r}, not a token id", file=file, row=row, column=column
            ) from exc
        if number < 0 or number != float(item):
            raise InputError(f"holds {item!r}, not a token id", file=file, row=row, column=column)
        ids.append(number)
    return tuple(ids)


def _strength(value: Any, file: str, row: int) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError) as exc:
        raise InputError(
            f"{value!r} is not a number", file=file, row=row, column="strength"
        ) from exc
    if not math.isfinite(number):
        raise InputError(f"{value!r} is not a finite number", file=file, row=row, column="strength")
    return number


def _check_family(family: str, file: str, row: int) -> None:
    known = known_families()
    if family not in known:
        raise InputError(
            f"unknown family {family!r} (known: {', '.join(known)}){hint(family, known)}",
            file=file,
            row=row,
            column="family",
        )


def _variant(record: Record, variant_id: str, file: str, row: int) -> VariantKey:
    """Family, subtype, strength and position from the columns, else from the id; where both
    are given they must agree."""
    parsed = parse_variant_id(variant_id)
    fields: dict[str, Any] = {}
    for index, column in enumerate(VARIANT_COLUMNS):
        given = record.get(column)
        from_id = parsed[index] if parsed else None
        if _blank(given):
            if from_id is None:
                raise InputError(
                    f"is required: variant id {variant_id!r} does not encode it "
                    "(sago ids look like 'noise:spacing:20:global')",
                    file=file,
                    row=row,
                    column=column,
                )
            given = from_id
        elif from_id is not None:
            same = (
                _strength(given, file, row) == _strength(from_id, file, row)
                if column == "strength"
                else str(given).strip() == from_id
            )
            if not same:
                raise InputError(
                    f"{given!r} disagrees with the variant id {variant_id!r}",
                    file=file,
                    row=row,
                    column=column,
                )
        fields[column] = given
        if column == "family":
            _check_family(str(given).strip(), file, row)
    family = str(fields["family"]).strip()
    position = str(fields["position"]).strip()
    if position not in POSITIONS:
        raise InputError(
            f"unknown position {position!r} (known: {', '.join(POSITIONS)})",
            file=file,
            row=row,
            column="position",
        )
    return VariantKey(
        family, str(fields["subtype"]).strip(), _strength(fields["strength"], file, row), position
    )


def _response(
    record: Record, response: Any, file: str, row: int, max_chars: int
) -> tuple[str | None, str | None]:
    """(response, failure reason). With a ``failure_reason`` column the source says which
    rows failed: a blank reason is a generation that succeeded, its empty response an empty
    answer; a reason is a failure kept with it. Without that column an empty response is
    missing (``EMPTY_RESPONSE``)."""
    if "failure_reason" not in record:
        return (None, EMPTY_RESPONSE) if _blank(response) else (str(response), None)
    reason = record["failure_reason"]
    if not _blank(reason):
        return None, _text(record, "failure_reason", file, row, max_chars)
    absent = response is None or (isinstance(response, float) and math.isnan(response))
    return ("" if absent else str(response)), None


def validate_row(
    record: Record, file: str, row: int, default_model: str | None, max_chars: int
) -> ExternalRow:
    require_columns(record, REQUIRED, file, row, suggest=True)
    variant_id = _text(record, "variant_id", file, row, max_chars)
    is_base = variant_id == BASE_VARIANT_ID
    response = record.get("response_text")
    if not _blank(response) and not isinstance(response, str):
        raise InputError(
            f"must be text, got {type(response).__name__}",
            file=file,
            row=row,
            column="response_text",
        )
    response_text, failure = _response(record, response, file, row, max_chars)
    model = record.get("model")
    references = _json_list(record.get("references"), file, row, "references") or []
    return ExternalRow(
        source=f"{file}:{row}",
        model=str(model).strip() if not _blank(model) else (default_model or DEFAULT_MODEL),
        dataset=_text(record, "dataset", file, row, max_chars),
        prompt_id=_text(record, "prompt_id", file, row, max_chars),
        variant_id=variant_id,
        variant=None if is_base else _variant(record, variant_id, file, row),
        prompt_text=_text(record, "prompt_text", file, row, max_chars),
        response_text=response_text,
        failure_reason=failure,
        references=tuple(str(r).strip() for r in references if str(r).strip()),
        response_token_ids=_token_ids(record.get("response_token_ids"), file, row),
        paired_base=_paired_base(record, is_base, file, row, max_chars),
    )


def _paired_base(record: Record, is_base: bool, file: str, row: int, max_chars: int) -> str | None:
    """The base sample a variant's answer is compared with (blank: the ``base`` row); the
    base row itself is compared with nothing."""
    if _blank(record.get(PAIRED_BASE)):
        return None
    if is_base:
        raise InputError(
            "the base row is compared with nothing: leave it blank",
            file=file,
            row=row,
            column=PAIRED_BASE,
        )
    return _text(record, PAIRED_BASE, file, row, max_chars).strip()


def _check_pairing(rows: list[ExternalRow], file: str) -> None:
    """Every ``paired_base`` names a base sample of the row's own prompt and model: its
    ``base`` row or one of its replays (the base asked again)."""
    samples = {
        (r.model, r.dataset, r.prompt_id, r.variant_id)
        for r in rows
        if r.is_base or (r.variant is not None and r.variant.family == REPLAY_FAMILY)
    }
    for r in rows:
        if r.paired_base is None:
            continue
        if (r.model, r.dataset, r.prompt_id, r.paired_base) not in samples:
            raise InputError(
                f"{r.paired_base!r} is no base sample of prompt {r.prompt_id!r} (model "
                f"{r.model!r}): name its 'base' row or one of its replays "
                f"({REPLAY_FAMILY}:base:<k>:global)",
                file=file,
                row=_row(r),
                column=PAIRED_BASE,
            )


def check_groups(rows: list[ExternalRow], file: str) -> None:
    """One row per (model, dataset, prompt, variant); exactly one base per prompt and model;
    one base prompt text per prompt across models."""
    seen: dict[tuple[str, str, str, str], str] = {}
    bases: dict[tuple[str, str, str], ExternalRow] = {}
    for r in rows:
        key = (r.model, r.dataset, r.prompt_id, r.variant_id)
        if key in seen:
            what = "two base rows" if r.is_base else "duplicate row"
            raise InputError(
                f"{what} for model {r.model!r}, prompt {r.prompt_id!r}, variant "
                f"{r.variant_id!r} (first at {seen[key]})",
                file=file,
                row=_row(r),
                column="variant_id",
            )
        seen[key] = r.source
        if r.is_base:
            bases[(r.model, r.dataset, r.prompt_id)] = r
    texts: dict[tuple[str, str], ExternalRow] = {}
    for r in bases.values():
        first = texts.setdefault((r.dataset, r.prompt_id), r)
        if first.prompt_text != r.prompt_text:
            raise InputError(
                f"base prompt of {r.prompt_id!r} differs from the one at {first.source}",
                file=file,
                row=_row(r),
                column="prompt_text",
            )
    for r in rows:
        if (r.model, r.dataset, r.prompt_id) not in bases:
            raise InputError(
                f"no base row (variant_id 'base') for prompt {r.prompt_id!r} of dataset "
                f"{r.dataset!r}, model {r.model!r}",
                file=file,
                row=_row(r),
                column="prompt_id",
            )
    _check_pairing(rows, file)


def _row(r: ExternalRow) -> int:
    return int(r.source.rpartition(":")[2])


def validate_records(
    records: list[Record], file: str, default_model: str | None, max_chars: int = 100_000
) -> list[ExternalRow]:
    if not records:
        raise InputError("holds no rows", file=file)
    # A reader that turned one file row into several records names it in ``__row__``.
    rows = [
        validate_row(rec, file, int(rec.get("__row__", i)), default_model, max_chars)
        for i, rec in enumerate(records, 1)
    ]
    check_groups(rows, file)
    return rows
