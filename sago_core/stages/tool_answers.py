"""One pass of a tool model (the structural rewriter, the translator) through its cache.

A tool is any backend (API models included) asked at T = 0 to rewrite texts. Each request
carries its cache key; the requests not cached are checked against the model's context
(one that does not fit is not sent: its answer is unusable with the token count and the
window as its reason, and one warning names such requests), the others sent in one batched
call, cleaned, and checked. Usable answers are cached; an answer the check rejects is
cached too when the caller keeps rejections (with why, under ``REJECTED``: at T = 0 the
tool would only give it again), else it is asked again on a rerun; a failed, cut-off or
unsent call never is. Cached answers are checked again when read, so none is ever served
as if it were good. The tool's backend is opened only when some request is not cached: a
rerun over a warm cache loads no model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sago_core.artifacts.json_cache import JsonCache
from sago_core.backends.protocol import Backend, Generation
from sago_core.stages.generation import Origin, check_fit, warn_unfit

# The field of a cached answer that holds why the check rejected it (absent: usable).
REJECTED = "rejected"


@dataclass(frozen=True)
class ToolRequest:
    """One instruction to a tool, its cache key and where its text came from."""

    instruction: str
    key: str
    origin: Origin


@dataclass(frozen=True)
class ToolAnswer:
    """A cleaned answer and why it is unusable (None: usable)."""

    text: str
    reason: str | None


def ask_tool(
    open_tool: Callable[[], Backend],
    requests: Sequence[ToolRequest],
    cache: JsonCache,
    max_new_tokens: int,
    batch_size: int,
    clean: Callable[[int, str], str],
    check: Callable[[int, str], str | None],
    entry: Callable[[int, str], dict[str, Any]],
    whole: bool = False,
    keep_rejected: bool = False,
) -> list[ToolAnswer]:
    """The answer to each request, from the cache or the tool. ``clean(i, raw)`` cleans
    request i's raw answer, ``check(i, text)`` says why it is unusable (cached answers are
    checked again, so a stricter check applies to them too), ``entry(i, text)`` is what a
    usable fresh answer is cached as (it holds ``text``). A failed call is unusable with
    the backend's reason, a request over the tool's context with its token count and the
    window (neither is cached); with ``whole``, so is an answer whose kept text runs into
    the token limit (a translation cut short is not the prompt). ``open_tool`` builds the
    tool's backend, called only when some request is not cached; ``keep_rejected`` caches
    the answers ``check`` rejects too, with their reason."""
    hits = [cache.get(r.key) for r in requests]
    todo = [i for i, hit in enumerate(hits) if hit is None]
    answers: list[Generation] = []
    unfit: dict[int, str] = {}
    if todo:
        backend = open_tool()
        instructions = [requests[i].instruction for i in todo]
        fit = check_fit(backend, instructions, max_new_tokens)
        warn_unfit(fit, [requests[i].origin for i in todo], "its max_new_tokens", "tool request")
        unfit = {i: reason for j, i in enumerate(todo) if (reason := fit.reason(j, "instruction"))}
        asked = [j for j, i in enumerate(todo) if i not in unfit]
        if asked:
            answers = backend.generate([instructions[j] for j in asked], max_new_tokens, batch_size)
        todo = [todo[j] for j in asked]
    fresh = {i: clean(i, a.response_text) for i, a in zip(todo, answers, strict=True)}
    fresh.update({i: "" for i in unfit})
    faults = {
        i: fault
        for i, a in zip(todo, answers, strict=True)
        if (fault := _fault(a, fresh[i], max_new_tokens, whole)) is not None
    }
    faults.update(unfit)
    results = []
    for i, request in enumerate(requests):
        hit = hits[i]
        text = str(hit["text"]) if hit is not None else fresh[i]
        reason = faults.get(i) or check(i, text)
        if hit is None and i not in faults and (reason is None or keep_rejected):
            rejected = {} if reason is None else {REJECTED: reason}
            cache.put(request.key, {**entry(i, text), **rejected})
        results.append(ToolAnswer(text, reason))
    return results


def _fault(answer: Generation, text: str, max_new_tokens: int, whole: bool) -> str | None:
    if answer.failure_reason:
        return f"tool call failed: {answer.failure_reason}"
    cut = answer.finish_reason == "length" and answer.response_text.rstrip().endswith(text)
    if whole and text and cut:
        return f"cut off at max_new_tokens {max_new_tokens}"
    return None
