"""One lm-evaluation-harness ``--log_samples`` line -> what sago reads from it: the prompt
(text, or chat messages), the response, the references and the identities (model, template,
document, run) that ``lmeval.py`` groups by.

``arguments``: ``{"gen_args_<i>": {"arg_<j>": ...}}`` (``evaluation_tracker.py``), one entry
per request; older files: a list of argument lists. ``arg_0`` is the prompt: text, or, for an
API chat model with a chat template (``api_models.py``'s ``apply_chat_template``), the chat
messages as JSON text in a ``JsonChatStr``, a one-field named tuple that ``json.dumps`` writes
as a one-element list (``["[{\\"role\\": \\"system\\", ...}, {\\"role\\": \\"user\\", ...}]"]``);
a ``remote`` tokenizer backend passes the message list itself. A chat prompt's text is its
turns after the system turn (the user turns, with the assistant turns between them where the
demonstrations are written as turns, ``--fewshot_as_multiturn``), joined by a blank line; the
system turn is context, kept apart (``system``) and counted, not part of the prompt text
(``lmeval.py`` puts it back where a document's templates differ in it).
"""

from __future__ import annotations

import json
import math
from functools import partial
from typing import Any

from sago_core.errors import InputError
from sago_core.external.columns import Record, require_columns

REQUIRED = ("doc_id", "arguments", "resps", "filtered_resps")
TEMPLATE_KEYS = ("task", "template")  # a joined file names each line's template (lm-eval task)
MODEL_KEY = "model"  # a joined file of several models names each line's model
SHOTS_KEYS = ("num_fewshot", "n_shot", "n-shot")  # a line's number of demonstrations, if named


def _index(key: str) -> int:
    tail = key.rpartition("_")[2]
    return int(tail) if tail.isdigit() else 0


def arguments(value: Any, file: str, row: int) -> list[list[Any]]:
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


def messages(value: Any) -> list[dict[str, Any]] | None:
    """The chat messages a prompt argument holds (a ``JsonChatStr`` as written, its JSON
    text, or the list itself), else None (a text prompt)."""
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str):
        value = value[0]
    if isinstance(value, str):
        if not value.lstrip().startswith("["):
            return None
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return None
    if (
        isinstance(value, list)
        and value
        and all(isinstance(m, dict) and "role" in m and "content" in m for m in value)
    ):
        return value
    return None


def _content(content: Any) -> str:
    """A message's text: the text itself, or its text parts (a multimodal prompt) joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(p["text"]) for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


def prompt(value: Any, file: str, row: int) -> tuple[str, str | None, bool]:
    """(prompt text, system turn, is chat) of a request's first argument."""
    chat = messages(value)
    if chat is None:
        if isinstance(value, list) and len(value) == 1:
            value = value[0]  # a one-field named tuple holding the text
        if isinstance(value, str) and value.strip():
            return value, None, False
        raise InputError("holds no prompt text", file=file, row=row, column="arguments")
    system = [_content(m["content"]) for m in chat if m["role"] in ("system", "developer")]
    turns = [_content(m["content"]) for m in chat if m["role"] not in ("system", "developer")]
    if not any(m["role"] == "user" for m in chat) or not "".join(turns).strip():
        raise InputError(
            "holds chat messages with no user turn", file=file, row=row, column="arguments"
        )
    return "\n\n".join(t for t in turns if t), "\n\n".join(system) or None, True


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


def response(record: Record, args: list[list[Any]], file: str, row: int) -> tuple[str, bool]:
    """(response, answered by log-likelihood)."""
    resps = record["resps"]
    bad = partial(InputError, file=file, row=row, column="resps")
    if not isinstance(resps, list) or not resps:
        raise bad("holds no response")
    first = resps[0][0] if isinstance(resps[0], list) and resps[0] else resps[0]
    if isinstance(first, str):
        return first, False
    lls = [_loglikelihood(r) for r in resps]
    if any(ll is None for ll in lls) or len(args) != len(lls):
        raise bad("is neither a generation nor one [log-likelihood, is_greedy] per request")
    known = [ll for ll in lls if ll is not None]  # all of them: a None is refused above
    best = max(range(len(known)), key=known.__getitem__)
    if len(args[best]) < 2 or not isinstance(args[best][1], str):
        raise InputError(
            f"request {best} names no continuation", file=file, row=row, column="arguments"
        )
    return args[best][1], True


def references(record: Record, args: list[list[Any]], by_loglikelihood: bool) -> list[str]:
    target = record.get("target")
    if target is None or str(target).strip() == "":
        return []
    text = str(target).strip()
    if by_loglikelihood and text.isdigit() and int(text) < len(args) and len(args[int(text)]) > 1:
        return [str(args[int(text)][1]).strip()]
    return [text]


def _shots(record: Record, file: str, row: int) -> int | None:
    for key in SHOTS_KEYS:
        value = record.get(key)
        if value is None or value == "":
            continue
        try:
            shots = int(value)
        except (TypeError, ValueError):
            shots = -1
        if shots < 0 or str(shots) != str(value).strip():
            raise InputError(
                f"{value!r} is not a number of demonstrations", file=file, row=row, column=key
            )
        return shots
    return None


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def parse(record: Record, file: str, row: int, default_task: str) -> dict[str, Any]:
    """What sago reads from one line (see the module doc)."""
    require_columns(record, REQUIRED, file, row)
    args = arguments(record["arguments"], file, row)
    if not args or not args[0]:
        raise InputError("holds no prompt text", file=file, row=row, column="arguments")
    text, system, chat = prompt(args[0][0], file, row)
    answer, by_ll = response(record, args, file, row)
    model = record.get(MODEL_KEY)
    return {
        "row": row,
        "model": str(model).strip() if model not in (None, "") else None,
        "template": next((str(record[k]) for k in TEMPLATE_KEYS if record.get(k)), default_task),
        "doc_id": str(record["doc_id"]).strip(),
        "doc_hash": record.get("doc_hash"),
        "prompt_text": text,
        "system": system,
        "chat": chat,
        "shots": _shots(record, file, row),
        "arguments": _canonical(record["arguments"]),
        "resps": _canonical(record["resps"]),
        "filter": record.get("filter"),
        "response_text": answer,
        "by_loglikelihood": by_ll,
        "references": references(record, args, by_ll),
    }
