"""lm-evaluation-harness ``--log_samples`` JSONL -> rows of the input schema.

The format followed: lm-evaluation-harness 0.4.x as ``lm_eval/evaluator.py`` builds each
logged sample and ``lm_eval/loggers/evaluation_tracker.py`` writes it to
``samples_<task>_<date>.jsonl`` (checked against 0.4.9.1): one line per document and filter
with ``doc_id``, ``doc``, ``target`` (as text), ``arguments`` (``{"gen_args_<i>": {"arg_<j>":
...}}``, one entry per request; older files: a list of argument lists), ``resps`` and
``filtered_resps`` (every leaf turned into text by ``sanitize_list``), ``filter``,
``metrics``, ``doc_hash``, ``prompt_hash``, ``target_hash`` and the metric values.

A template is one lm-eval task (each prompt template of a benchmark is a task of its own):
the line's ``task`` (or ``template``) field, else the file's task name (``samples_`` and the
date stripped). Several templates' files are read as one by concatenating them with that
field added. Documents are grouped by ``doc_id`` (and checked by ``doc_hash``: one id naming
two documents is an error); the base is the template ``--base-where task=NAME`` names, else
the first in the file; every other template of a document is a variant (``lm-eval:<task>``,
family ``--family``, subtype ``--subtype`` or ``template``, strength 1, position global).

The response: ``generate_until``: the generation as the model gave it (``resps``; an empty
one is an empty answer: lm-eval recorded it as generated); ``loglikelihood`` (multiple
choice): the continuation with the highest log-likelihood. The reference: ``target``; for
multiple choice a target that is a choice's index names that continuation. lm-eval's
log-likelihoods are of each choice under each template's prompt, not the teacher-forced
pass sago's Act/Prob/Ent read, so those axes are missing with the usual reason (or measured
by ``--model``); the rows holding them are counted in a note. A further filter's line of the
same document and template repeats its generation and is skipped (counted).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from sago_core.errors import InputError
from sago_core.external.columns import Record, require_columns
from sago_core.external.options import ExternalSource
from sago_core.external.templates import (
    base_of,
    choose_base_template,
    refuse_base_only,
    template_row,
)

REQUIRED = ("doc_id", "arguments", "resps", "filtered_resps")
TEMPLATE_KEYS = ("task", "template")
FURTHER_FILTERS = "lm-eval lines of a further filter (same generation) skipped"
LOGLIKELIHOODS = "lm-eval rows answered by log-likelihood (multiple choice; no sago axis)"
_DATE = re.compile(r"_\d{4}-\d{2}-\d{2}T[\d\-.]+$")


def task_of_file(file: str) -> str:
    """``samples_<task>_<date>.jsonl`` -> ``<task>``; another name: its stem."""
    stem = Path(file).stem
    if stem.startswith("samples_"):
        stem = stem[len("samples_") :]
    return _DATE.sub("", stem) or Path(file).stem


def _arguments(value: Any, file: str, row: int) -> list[list[Any]]:
    """One list of arguments per request, from either written form."""
    if isinstance(value, dict):
        requests = [value[k] for k in sorted(value, key=_index) if isinstance(value[k], dict)]
        return [[req[k] for k in sorted(req, key=_index)] for req in requests]
    if isinstance(value, list) and all(isinstance(v, list | tuple) for v in value):
        return [list(v) for v in value]
    raise InputError(
        "must be {gen_args_<i>: {arg_<j>: ...}} or a list of argument lists",
        file=file,
        row=row,
        column="arguments",
    )


def _index(key: str) -> int:
    tail = key.rpartition("_")[2]
    return int(tail) if tail.isdigit() else 0


def _loglikelihood(resp: Any) -> float | None:
    """``[ll, is_greedy]`` (as text after lm-eval's sanitising) -> ll; else None."""
    while isinstance(resp, list | tuple) and len(resp) == 1 and isinstance(resp[0], list | tuple):
        resp = resp[0]
    if isinstance(resp, list | tuple) and len(resp) == 2:
        try:
            number = float(resp[0])
        except (TypeError, ValueError):
            return None
        return number if math.isfinite(number) else None
    return None


def _response(record: Record, args: list[list[Any]], file: str, row: int) -> tuple[str, bool]:
    """(response, answered by log-likelihood)."""
    resps = record["resps"]
    if not isinstance(resps, list) or not resps:
        raise InputError("holds no response", file=file, row=row, column="resps")
    first = resps[0][0] if isinstance(resps[0], list) and resps[0] else resps[0]
    if isinstance(first, str):
        return first, False
    lls = [_loglikelihood(r) for r in resps]
    if any(ll is None for ll in lls) or len(args) != len(lls):
        raise InputError(
            "is neither a generation nor one [log-likelihood, is_greedy] per request",
            file=file,
            row=row,
            column="resps",
        )
    known = [ll for ll in lls if ll is not None]  # all of them: a None is refused above
    best = max(range(len(known)), key=known.__getitem__)
    if len(args[best]) < 2 or not isinstance(args[best][1], str):
        raise InputError(
            f"request {best} names no continuation", file=file, row=row, column="arguments"
        )
    return args[best][1], True


def _references(record: Record, args: list[list[Any]], by_loglikelihood: bool) -> list[str]:
    target = record.get("target")
    if target is None or str(target).strip() == "":
        return []
    text = str(target).strip()
    if by_loglikelihood and text.isdigit() and int(text) < len(args) and len(args[int(text)]) > 1:
        return [str(args[int(text)][1]).strip()]
    return [text]


def _parse(record: Record, file: str, row: int, default_task: str) -> dict[str, Any]:
    require_columns(record, REQUIRED, file, row)
    args = _arguments(record["arguments"], file, row)
    if not args or not args[0] or not isinstance(args[0][0], str):
        raise InputError("holds no prompt text", file=file, row=row, column="arguments")
    response, by_ll = _response(record, args, file, row)
    template = next((str(record[k]) for k in TEMPLATE_KEYS if record.get(k)), default_task)
    return {
        "row": row,
        "template": template,
        "doc_id": str(record["doc_id"]).strip(),
        "doc_hash": record.get("doc_hash"),
        "prompt_text": args[0][0],
        "response_text": response,
        "by_loglikelihood": by_ll,
        "references": _references(record, args, by_ll),
    }


def to_input_schema(
    records: list[Record], source: ExternalSource, file: str
) -> tuple[list[Record], dict[str, int]]:
    if source.family is None:
        raise InputError(
            "lm-eval samples carry no SAGO variant family: give --family (and --subtype)",
            file=file,
        )
    default_task = task_of_file(file)
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    further = 0
    for row, record in enumerate(records, start=1):
        p = _parse(record, file, row, default_task)
        key = (p["doc_id"], p["template"])
        if key in seen:
            further += 1  # another filter of the same generation
            continue
        seen[key] = p
    parsed = list(seen.values())
    templates = list(dict.fromkeys(p["template"] for p in parsed))
    base_template = choose_base_template(source, templates, "the file's", file)
    dataset = default_task
    groups: dict[str, list[dict[str, Any]]] = {}
    for p in parsed:
        groups.setdefault(p["doc_id"], []).append(p)
    out: list[Record] = []
    alone: list[int] = []
    for doc_id, members in groups.items():
        hashes = {p["doc_hash"] for p in members if p["doc_hash"]}
        if len(hashes) > 1:
            raise InputError(
                f"doc_id {doc_id!r} names different documents (doc_hash differs; rows "
                f"{[p['row'] for p in members]}): concatenate one benchmark's templates only",
                file=file,
                row=members[0]["row"],
                column="doc_hash",
            )
        base = base_of(members, base_template, f"doc_id {doc_id!r}", file)
        if len(members) == 1:
            alone.append(base["row"])
            continue
        for p in members:
            row_out: Record = {
                "__row__": p["row"],
                "model": source.model,
                "dataset": dataset,
                "prompt_id": doc_id,
                "prompt_text": p["prompt_text"],
                "response_text": p["response_text"],
                "failure_reason": None,  # lm-eval logged it as the model's answer
                "references": p["references"],
            }
            template = None if p is base else p["template"]
            out.append(template_row(row_out, template, "lm-eval", source))
    refuse_base_only(alone, "document(s)", "add the other templates' lines (with their task)", file)
    notes = {
        FURTHER_FILTERS: further,
        LOGLIKELIHOODS: sum(p["by_loglikelihood"] for p in parsed),
    }
    return out, {k: v for k, v in notes.items() if v}
