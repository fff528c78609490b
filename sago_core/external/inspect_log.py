"""inspect_ai eval logs -> rows of the input schema.

The format followed is inspect_ai 0.3.260's (``src/inspect_ai/log/_log.py``'s ``EvalLog`` and
``EvalSample``; ``log/_recorders/eval.py`` for the ``.eval`` zip): the JSON log, a JSON array
or JSONL of logs, or the ``.eval`` archive. docs/tutorials/score-generations.md ("inspect_ai
eval logs") says what each field becomes; the rules that shape this module: logs are grouped
by model first (one task on two models is one template answered twice), each log is one
template named by its task (and ``task_args`` where two logs of a model share a task) unless
its samples name theirs in ``metadata.template``; an unfinished log is read as it is, its
samples without a base or any other template's answer skipped and counted; only the first
epoch is read; log-probabilities name tokens as text and are of each sample's own prompt, so
they are checked and counted but fill no axis.
"""

from __future__ import annotations

import json
import math
import zipfile
from pathlib import Path
from typing import Any

from sago_core.errors import InputError
from sago_core.external.columns import Record
from sago_core.external.options import ExternalSource
from sago_core.external.templates import (
    base_of,
    choose_base_template,
    refuse_base_only,
    template_row,
)

REQUIRED = ("eval", "samples")  # the keys of a log record
TEMPLATE_FIELD = "template"  # sample metadata naming the template within one log
ITEM_FIELD = "item_id"  # sample metadata naming the item a template's sample answers
ATTACHMENT = "attachment://"
HEADER_JSON = "header.json"
START_JSON = "_journal/start.json"
SAMPLES_DIR = "samples/"
LOGPROBS = "inspect samples with log-probs (own response under own prompt: no SAGO axis)"
LATER_EPOCHS = "inspect samples of a later epoch skipped (the first epoch is read)"
UNFINISHED = "WARNING: inspect logs of an eval with status"
INCOMPLETE = (
    "inspect samples of a model whose eval did not finish, missing the base or every other "
    "template (skipped)"
)


def is_log(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("eval"), dict) and "samples" in value


def read_archive(path: Path) -> Record:
    """An ``.eval`` zip as one ``EvalLog`` record (header plus samples)."""
    file = str(path)
    try:
        with zipfile.ZipFile(path) as archive:
            names = list(dict.fromkeys(archive.namelist()))  # a repeated name: its last member
            head = HEADER_JSON if HEADER_JSON in names else START_JSON
            if head not in names:
                raise InputError(
                    f"is no inspect_ai .eval archive (neither {HEADER_JSON} nor {START_JSON})",
                    file=file,
                )
            log = _member(archive, head, file)
            samples = [
                _member(archive, n, file)
                for n in names
                if n.startswith(SAMPLES_DIR) and n.endswith(".json")
            ]
    except zipfile.BadZipFile as exc:
        raise InputError(f"is not a zip archive: {exc}", file=file) from exc
    if not isinstance(log, dict) or not isinstance(log.get("eval"), dict):
        raise InputError(f"{head} holds no 'eval' object", file=file)
    samples.sort(key=lambda s: (_epoch(s), _id_order(s.get("id"))))  # inspect's sort_samples
    return {**log, "samples": samples}


def _member(archive: zipfile.ZipFile, name: str, file: str) -> Any:
    try:
        return json.loads(archive.read(name).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"member {name} is not valid JSON: {exc}", file=file) from exc


def _epoch(sample: Any) -> int:
    epoch = sample.get("epoch", 1) if isinstance(sample, dict) else 1
    return epoch if isinstance(epoch, int) else 1


def _id_order(value: Any) -> tuple[int, int, str]:
    return (0, value, "") if isinstance(value, int) else (1, 0, str(value))


def _text(content: Any, attachments: dict[str, Any]) -> str | None:
    """A message's text: the text itself, or its text parts joined by newlines."""
    if isinstance(content, str):
        return _resolve(content, attachments)
    if isinstance(content, list):
        parts = [
            _resolve(p["text"], attachments)
            for p in content
            if isinstance(p, dict)
            and p.get("type", "text") == "text"
            and isinstance(p.get("text"), str)
        ]
        return "\n".join(parts)
    return None


def _resolve(text: str, attachments: dict[str, Any]) -> str:
    if text.startswith(ATTACHMENT):
        value = attachments.get(text[len(ATTACHMENT) :])
        return value if isinstance(value, str) else text
    return text


def _prompt(sample: Record, attachments: dict[str, Any], file: str, row: int) -> str:
    messages = sample.get("messages")
    if isinstance(messages, list) and messages:
        asked = []
        for m in messages:
            if not isinstance(m, dict) or m.get("role") == "assistant":
                break
            if m.get("role") in ("system", "user"):
                asked.append(_text(m.get("content"), attachments) or "")
        if any(asked):
            return "\n\n".join(t for t in asked if t)
    given = sample.get("input")
    if isinstance(given, list):
        texts = [
            _text(m.get("content"), attachments) or ""
            for m in given
            if isinstance(m, dict) and m.get("role") in ("system", "user")
        ]
        given = "\n\n".join(t for t in texts if t)
    if not isinstance(given, str) or not given.strip():
        raise InputError(
            f"sample {sample.get('id')!r} holds no prompt text", file=file, row=row, column="input"
        )
    return given


def _response(
    sample: Record, attachments: dict[str, Any], file: str, row: int
) -> tuple[str | None, str | None, int]:
    """(response, failure reason, log-prob steps)."""
    error = sample.get("error")
    if isinstance(error, dict) and error.get("message"):
        return None, f"inspect sample error: {error['message']}", 0
    output = sample.get("output") or {}
    if not isinstance(output, dict):
        raise InputError("must be an object", file=file, row=row, column="output")
    if output.get("error"):
        return None, f"inspect output error: {output['error']}", 0
    choices = output.get("choices") or []
    if choices:
        choice = choices[0]
        message = choice.get("message") if isinstance(choice, dict) else None
        text = _text(message.get("content"), attachments) if isinstance(message, dict) else None
        if text is None:
            raise InputError(
                "choices[0].message.content is neither text nor content parts",
                file=file,
                row=row,
                column="output",
            )
        return text, None, _logprob_steps(choice.get("logprobs"), file, row)
    completion = output.get("completion")
    if isinstance(completion, str) and completion:
        return completion, None, 0
    return None, "inspect sample has no output", 0


def _logprob_steps(logprobs: Any, file: str, row: int) -> int:
    if not isinstance(logprobs, dict):
        return 0
    steps = logprobs.get("content") or []
    for step in steps:
        value = step.get("logprob") if isinstance(step, dict) else None
        if (
            not isinstance(value, int | float)
            or isinstance(value, bool)
            or not math.isfinite(value)
            or value > 0
        ):
            raise InputError(
                f"holds log-prob {value!r}, not a finite number <= 0",
                file=file,
                row=row,
                column="output.choices[0].logprobs",
            )
    return len(steps)


def _references(sample: Record) -> list[str]:
    target = sample.get("target")
    targets = target if isinstance(target, list) else [target]
    refs = [str(t).strip() for t in targets if t is not None and str(t).strip()]
    choices = sample.get("choices")
    if isinstance(choices, list):
        for ref in list(refs):
            index = ord(ref) - ord("A") if len(ref) == 1 and ref.isalpha() else -1
            if 0 <= index < len(choices) and isinstance(choices[index], str):
                refs.append(choices[index].strip())
    return list(dict.fromkeys(refs))


def _names_every_template(log: Record) -> bool:
    samples = log.get("samples")
    return isinstance(samples, list) and all(
        isinstance(s, dict) and (s.get("metadata") or {}).get(TEMPLATE_FIELD) for s in samples
    )


def _model_of(log: Record) -> str:
    return str(log["eval"].get("model") or "")


def describe_log(log: Record, index: int) -> str:
    """``log 2 (eval_id 'e')``, naming only the ids the log has: older logs have no
    ``eval_id`` (``run_id`` and ``task_id`` are named instead), and a missing id is left out,
    never shown as None."""
    spec = log["eval"]
    shown = [f"{k} {spec[k]!r}" for k in ("eval_id", "task_id", "run_id") if spec.get(k)][:2]
    return f"log {index}" + (f" ({', '.join(shown)})" if shown else "")


def _template_names(logs: list[Record], file: str) -> list[str]:
    """Each log's template name: its task, or the task and its arguments where two logs of
    one model share a task (logs of different models are the same templates answered by
    different models). Two logs of one model still named alike (same task and arguments:
    templates differing by solver or system prompt) are an error unless their samples name
    their templates."""
    tasks = [str(log["eval"].get("task") or "") for log in logs]
    models = [_model_of(log) for log in logs]
    names = list(tasks)
    for i, log in enumerate(logs):
        if sum(models[j] == models[i] and tasks[j] == tasks[i] for j in range(len(logs))) > 1:
            args = log["eval"].get("task_args") or {}
            shown = ",".join(f"{k}={args[k]}" for k in sorted(args))
            names[i] = f"{names[i]}[{shown}]"
    for key in dict.fromkeys(zip(models, names, strict=True)):
        alike = [i for i, k in enumerate(zip(models, names, strict=True)) if k == key]
        if len(alike) > 1 and not all(_names_every_template(logs[i]) for i in alike):
            shown = ", ".join(describe_log(logs[i], i + 1) for i in alike)
            raise InputError(
                f"{shown} of model {key[0]!r} share task and task_args {key[1]!r}, so "
                "their templates "
                f"cannot be told apart: give each log's samples metadata.{TEMPLATE_FIELD} "
                "naming its template (or run the templates with different task_args)",
                file=file,
                column="eval.task",
            )
    return names


def unfinished(logs: list[Record]) -> dict[str, int]:
    """Logs of an eval that did not succeed, counted by status: read as they are (a
    cancelled or errored eval keeps the samples it finished; its error is named)."""
    counts: dict[str, int] = {}
    for log in logs:
        status = str(log.get("status") or "started")
        if status != "success":
            error = log.get("error")
            message = error.get("message") if isinstance(error, dict) else None
            why = f": {str(message).splitlines()[0][:120]}" if message else ""
            note = f"{UNFINISHED} '{status}'{why} (its samples read as they are)"
            counts[note] = counts.get(note, 0) + 1
    return counts


def _parse_samples(logs: list[Record], file: str) -> tuple[list[dict[str, Any]], int, int]:
    parsed: list[dict[str, Any]] = []
    seen: set[tuple[str, str, str]] = set()
    later = steps_rows = 0
    row = 0
    names = _template_names(logs, file)
    for log, log_template in zip(logs, names, strict=True):
        spec = log["eval"]
        samples = log.get("samples")
        if not isinstance(samples, list):
            raise InputError(
                f"the log of task {spec.get('task')!r} holds no samples (log_samples off?)",
                file=file,
                column="samples",
            )
        dataset = (spec.get("dataset") or {}).get("name")
        for sample in samples:
            row += 1
            if not isinstance(sample, dict) or "id" not in sample:
                raise InputError("is not a sample with an id", file=file, row=row, column="id")
            meta = sample.get("metadata") or {}
            attachments = sample.get("attachments") or {}
            template = str(meta.get(TEMPLATE_FIELD) or log_template)
            item = str(meta.get(ITEM_FIELD, sample["id"])).strip()
            model = str(spec.get("model") or (sample.get("output") or {}).get("model") or "")
            key = (model, item, template)
            if key in seen:
                if _epoch(sample) > 1:
                    later += 1  # another epoch of the same answer
                    continue
                raise InputError(
                    f"sample {sample['id']!r} (epoch 1) of template {template!r} and model "
                    f"{model!r} is read twice: give each template's samples a distinct "
                    f"metadata.{TEMPLATE_FIELD} or {ITEM_FIELD}",
                    file=file,
                    row=row,
                    column="id",
                )
            seen.add(key)
            response, failure, steps = _response(sample, attachments, file, row)
            steps_rows += steps > 0
            parsed.append(
                {
                    "row": row,
                    "model": model or None,
                    "dataset": str(dataset) if dataset else None,
                    "task": str(spec.get("task") or ""),
                    "template": template,
                    "item": item,
                    "prompt_text": _prompt(sample, attachments, file, row),
                    "response_text": response,
                    "failure_reason": failure,
                    "references": _references(sample),
                }
            )
    return parsed, later, steps_rows


def to_input_schema(
    logs: list[Record], source: ExternalSource, file: str
) -> tuple[list[Record], dict[str, int]]:
    if source.family is None:
        raise InputError(
            "inspect_ai logs carry no SAGO variant family: give --family (and --subtype)",
            file=file,
        )
    for index, log in enumerate(logs, start=1):
        if not is_log(log):
            raise InputError(
                f"log {index} is no inspect_ai EvalLog (needs {list(REQUIRED)})", file=file
            )
    parsed, later, steps_rows = _parse_samples(logs, file)
    if not parsed:
        raise InputError("the logs hold no samples", file=file, column="samples")
    templates = list(dict.fromkeys(p["template"] for p in parsed))
    base_template = choose_base_template(source, templates, "the logs'", file)
    groups: dict[tuple[str | None, str], list[dict[str, Any]]] = {}
    for p in parsed:
        groups.setdefault((p["model"], p["item"]), []).append(p)
    cut_short = {_model_of(log) or None for log in logs if log.get("status") != "success"}
    out: list[Record] = []
    alone: list[int] = []
    incomplete = 0
    for (model, item), members in groups.items():
        rows = [p["row"] for p in members]
        datasets = {p["dataset"] for p in members if p["dataset"]}
        if len(datasets) > 1:
            raise InputError(
                f"sample {item!r} comes from different datasets {sorted(datasets)} (rows "
                f"{rows}): give one benchmark's templates only",
                file=file,
                row=members[0]["row"],
                column="eval.dataset.name",
            )
        has_base = any(p["template"] == base_template for p in members)
        if (len(members) == 1 or not has_base) and model in cut_short:
            incomplete += 1  # its other templates' answers never came: the eval stopped
            continue
        base = base_of(members, base_template, f"sample {item!r}", file)
        if len(members) == 1:
            alone.append(base["row"])
            continue
        dataset = base["dataset"] or base["task"]
        for p in members:
            row_out: Record = {
                "__row__": p["row"],
                "model": p["model"] or source.model,
                "dataset": dataset,
                "prompt_id": item,
                "prompt_text": p["prompt_text"],
                "response_text": p["response_text"],
                "failure_reason": p["failure_reason"],
                "references": p["references"],
            }
            template = None if p is base else p["template"]
            out.append(template_row(row_out, template, "inspect", source))
    refuse_base_only(alone, "sample(s)", "add the other templates' logs", file)
    notes = {
        LATER_EPOCHS: later,
        LOGPROBS: steps_rows,
        INCOMPLETE: incomplete,
        **unfinished(logs),
    }
    return out, {k: v for k, v in notes.items() if v}
