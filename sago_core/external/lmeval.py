"""lm-evaluation-harness ``--log_samples`` JSONL -> rows of the input schema.

The format followed is lm-evaluation-harness 0.4.x's (``lm_eval/evaluator.py`` builds each
logged sample, ``lm_eval/loggers/evaluation_tracker.py`` writes it; checked against 0.4.9.1
and 0.4.13.dev0); ``lmeval_lines.py`` reads one line. docs/tutorials/score-generations.md
("lm-eval") says what each field becomes. A template is one lm-eval task; the dataset is the
benchmark the templates share (``masakhaner_luo_prompt_1`` ... ``_5`` -> ``masakhaner_luo``).
Lines are told apart, none dropped unsaid: a further filter of one generation is skipped and
counted; another prompt of one task and document is a variant (``fewshot`` where it is the
shortest prompt with demonstrations inserted, else ``lm-eval:<task>#<n>``); other models'
lines are grouped apart. One prompt answered twice differently by one model is an error.
lm-eval's log-likelihoods are of each choice under its own prompt, not sago's teacher-forced
pass, so Act, Prob and Ent stay missing (or ``--model`` measures them).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from sago_core.errors import InputError
from sago_core.external import lmeval_lines
from sago_core.external.columns import Record
from sago_core.external.options import ExternalSource
from sago_core.external.schema import FEWSHOT_FAMILY
from sago_core.external.templates import (
    base_of,
    choose_base_template,
    refuse_base_only,
    template_row,
    variant_row,
)

REQUIRED = lmeval_lines.REQUIRED
FURTHER_FILTERS = "lm-eval lines of a further filter (same generation) skipped"
LOGLIKELIHOODS = "lm-eval rows answered by log-likelihood (multiple choice; no sago axis)"
CHAT_PROMPTS = "lm-eval chat prompts read from their messages (the user turns are the prompt)"
SYSTEM_TURNS = "lm-eval chat prompts with a system turn (context, not part of the prompt text)"
SYSTEMS_DIFFER = (
    "lm-eval documents whose prompts differ in their system turn (kept in the prompt text)"
)
RUNS = "lm-eval prompts of a task beyond its first (further runs, read as variants)"
FEWSHOT_DELIMITER = "\n\n"  # lm-eval's default fewshot_delimiter
_DATE = re.compile(r"_\d{4}-\d{2}-\d{2}T[\d\-.]+$")
_SEPARATORS = re.compile(r"[_\-.]")
_TEMPLATE_WORDS = {"prompt", "prompts", "template", "templates", "tmpl", "tpl", "variant", "v"}


def _common_prefix(texts: list[str]) -> str:
    """The characters every text starts with."""
    if not texts:
        return ""
    first, last = min(texts), max(texts)
    size = next((i for i, (a, b) in enumerate(zip(first, last, strict=False)) if a != b), None)
    return first if size is None else first[:size]


def task_of_file(file: str) -> str:
    """``samples_<task>_<date>.jsonl`` -> ``<task>``; another name: its stem."""
    stem = Path(file).stem
    if stem.startswith("samples_"):
        stem = stem[len("samples_") :]
    return _DATE.sub("", stem) or Path(file).stem


def benchmark_name(templates: list[str], fallback: str) -> str:
    """The name the templates share: the one task, else their common leading words with
    template words and numbers (``prompt_1``) dropped; ``fallback`` where they share none."""
    if len(templates) == 1:
        return templates[0]
    common = _common_prefix(templates)
    cut = max((m.start() for m in _SEPARATORS.finditer(common)), default=0)
    if all(len(t) == len(common) or _SEPARATORS.match(t, len(common)) for t in templates):
        cut = len(common)  # every template continues with a separator (or ends) here
    words = _SEPARATORS.split(common[:cut])
    while words and (words[-1].lower() in _TEMPLATE_WORDS or words[-1].isdigit() or not words[-1]):
        words.pop()
    return common[: len(_SEPARATORS.sub("_", "_".join(words)))] if words else fallback


def _distinct(parsed: list[dict[str, Any]], file: str) -> tuple[list[dict[str, Any]], int]:
    """The lines that are answers, without further filters' repeats (counted)."""
    seen: dict[tuple[Any, ...], dict[str, Any]] = {}
    further = 0
    for p in parsed:
        key = (p["model"], p["doc_id"], p["template"], p["arguments"])
        first = seen.get(key)
        if first is None:
            seen[key] = p
        elif first["resps"] == p["resps"]:
            further += 1  # another filter of the same generation
        else:
            who = f"model {p['model']!r}" if p["model"] else "one model"
            raise InputError(
                f"doc_id {p['doc_id']!r} of task {p['template']!r} is answered twice under the "
                f"same prompt with different responses (rows {first['row']} and {p['row']}) by "
                f"{who}: where two models answered, add a 'model' field naming each line's",
                file=file,
                row=p["row"],
                column="resps",
            )
    return list(seen.values()), further


def _insertion(shorter: str, longer: str) -> tuple[int, str] | None:
    """(where, what): the text ``longer`` inserts into ``shorter`` and the place, with
    ``shorter``'s end kept whole where it can be; None where ``longer`` is no such insertion
    or adds only after ``shorter``'s end."""
    if len(longer) <= len(shorter):
        return None
    tail = len(_common_prefix([shorter[::-1], longer[::-1]]))
    tail = min(tail, len(shorter))
    head = len(shorter) - tail
    if tail == 0 or not longer.startswith(shorter[:head]):
        return None
    return head, longer[head : len(longer) - tail]


def _marks(first_prompts: list[str]) -> tuple[str, str]:
    """The fixed opening and closing of a template's prompts (from two or more distinct
    ones; else empty), which every demonstration repeats."""
    distinct = list(dict.fromkeys(first_prompts))
    if len(distinct) < 2:
        return "", ""
    opening = _common_prefix(distinct)
    closing = _common_prefix([t[::-1] for t in distinct])[::-1]
    return opening, closing


def _shots(p: dict[str, Any], first: dict[str, Any], marks: tuple[str, str]) -> int | None:
    """How many demonstrations ``p``'s prompt holds beyond the template's first prompt:
    inserted before the question (no later than the end of the template's fixed opening),
    counted by the template's opening or closing, which each repeats; where the template's
    prompts show neither, by lm-eval's delimiter, which follows each."""
    if p["shots"] is not None and first["shots"] is not None:
        return p["shots"] if p["shots"] > first["shots"] else None
    found = _insertion(first["prompt_text"], p["prompt_text"])
    if found is None:
        return None
    head, inserted = found
    opening, closing = marks
    if opening.strip() or closing.strip():
        if head > len(opening):
            return None  # added inside or after the question: no demonstration
        count = next((n for m in (opening, closing) if m.strip() and (n := inserted.count(m))), 0)
    else:
        count = inserted.count(FEWSHOT_DELIMITER) if inserted.endswith(FEWSHOT_DELIMITER) else 0
    return count + (first["shots"] or 0) if count else None


def _first_of(members: list[dict[str, Any]]) -> dict[str, Any]:
    """A template's first prompt for a document: the fewest demonstrations (by
    ``num_fewshot`` where every line names it), else the shortest."""
    if all(p["shots"] is not None for p in members):
        return min(members, key=lambda p: (p["shots"], len(p["prompt_text"])))
    return min(members, key=lambda p: len(p["prompt_text"]))


def _rows_of(
    members: list[dict[str, Any]],
    base_template: str,
    marks: dict[tuple[Any, str], tuple[str, str]],
) -> list[tuple[dict[str, Any], str | None, int | None]]:
    """(line, its variant's template label or None for the base, its demonstrations where
    it is a few-shot run of the base template) of one (model, document)."""
    by_template: dict[str, list[dict[str, Any]]] = {}
    for p in members:
        by_template.setdefault(p["template"], []).append(p)
    out: list[tuple[dict[str, Any], str | None, int | None]] = []
    for template, lines in by_template.items():
        first = _first_of(lines)
        for n, p in enumerate(sorted(lines, key=lambda q: q is not first), start=1):
            if p is first:
                out.append((p, None if template == base_template else template, None))
                continue
            shots = _shots(p, first, marks[(p["model"], template)])
            if shots is None:
                out.append((p, f"{template}#{n}", None))
            elif template == base_template:
                out.append((p, f"{template}|fewshot:{shots}", shots))
            else:
                out.append((p, f"{template}|fewshot:{shots}", None))
    return out


def _check_document(members: list[dict[str, Any]], doc_id: str, file: str) -> None:
    hashes = {p["doc_hash"] for p in members if p["doc_hash"]}
    if len(hashes) > 1:
        raise InputError(
            f"doc_id {doc_id!r} names different documents (doc_hash differs; rows "
            f"{[p['row'] for p in members]}): concatenate one benchmark's templates only",
            file=file,
            row=members[0]["row"],
            column="doc_hash",
        )


def to_input_schema(
    records: list[Record], source: ExternalSource, file: str
) -> tuple[list[Record], dict[str, int]]:
    default_task = task_of_file(file)
    parsed = [
        lmeval_lines.parse(record, file, row, default_task) for row, record in enumerate(records, 1)
    ]
    lines, further = _distinct(parsed, file)
    templates = list(dict.fromkeys(p["template"] for p in lines))
    base_template = choose_base_template(source, templates, "the file's", file)
    dataset = benchmark_name(templates, default_task)
    groups: dict[tuple[Any, str], list[dict[str, Any]]] = {}
    for p in lines:
        groups.setdefault((p["model"], p["doc_id"]), []).append(p)
    firsts: dict[tuple[Any, str], list[str]] = {}
    for members in groups.values():
        for template in dict.fromkeys(p["template"] for p in members):
            first = _first_of([p for p in members if p["template"] == template])
            firsts.setdefault((first["model"], template), []).append(first["prompt_text"])
    marks = {key: _marks(prompts) for key, prompts in firsts.items()}
    out: list[Record] = []
    alone: list[int] = []
    runs = apart = 0
    for (model, doc_id), members in groups.items():
        _check_document(members, doc_id, file)
        rows = _rows_of(members, base_template, marks)
        base = base_of(members, base_template, f"doc_id {doc_id!r}", file)
        if len(rows) == 1:
            alone.append(base["row"])
            continue
        runs += len(rows) - len({p["template"] for p in members})  # beyond each task's first
        systems = len({p["system"] for p in members}) > 1  # the system turn is what varies
        apart += systems
        for line, label, shots in rows:
            # each prompt as asked where the system turn varies: system, a blank line, turns
            text = "\n\n".join(filter(None, (line["system"], line["prompt_text"])))
            asked = {**line, "prompt_text": text} if systems else line
            out.append(
                _row(asked, label, shots, model or source.model, dataset, doc_id, source, file)
            )
    refuse_base_only(alone, "document(s)", "add the other templates' lines (with their task)", file)
    notes = {
        FURTHER_FILTERS: further,
        RUNS: runs,
        LOGLIKELIHOODS: sum(p["by_loglikelihood"] for p in lines),
        CHAT_PROMPTS: sum(p["chat"] for p in lines),
        SYSTEM_TURNS: sum(p["system"] is not None for p in lines),
        SYSTEMS_DIFFER: apart,
    }
    return out, {k: v for k, v in notes.items() if v}


def _row(
    p: dict[str, Any],
    label: str | None,
    shots: int | None,
    model: str | None,
    dataset: str,
    doc_id: str,
    source: ExternalSource,
    file: str,
) -> Record:
    row: Record = {
        "__row__": p["row"],
        "model": model,
        "dataset": dataset,
        "prompt_id": doc_id,
        "prompt_text": p["prompt_text"],
        "response_text": p["response_text"],
        "failure_reason": None,  # lm-eval logged it as the model's answer
        "references": p["references"],
    }
    if shots is not None:
        vid = f"lm-eval:{label}"
        return variant_row(row, vid, FEWSHOT_FAMILY, "shots", float(shots), "prefix")
    if label is not None and source.family is None:
        raise InputError(
            f"lm-eval samples carry no SAGO variant family for their templates (row "
            f"{p['row']}, task {label!r}): give --family (and --subtype)",
            file=file,
        )
    return template_row(row, label, "lm-eval", source)
