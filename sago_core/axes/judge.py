"""Register mirroring by an LLM judge: is the variant's answer clearly politer (or ruder)
than the base answer? One YES/NO question per pair, asked at temperature 0.

The question depends on the direction of the variant (politer for s > 0, ruder for s < 0).
M(y^v, v) is the verdict; M(y_base, v) is 0 (an answer compared with itself shows no
increase), as for the offline detector. Verdicts are cached by (judge identity, prompt
version, direction, base answer, variant answer). An answer that is not a clear YES or NO is
recorded as unparseable (MR missing with the judge's words), never guessed; a failed judge
call is missing with its typed reason.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sago_core.artifacts.json_cache import JsonCache
from sago_core.axes.mirroring import Mirroring

JUDGE_PROMPT_VERSION = "register-judge-v1"
JUDGE_CALL_FAILED = "judge call failed"
JUDGE_MAX_TOKENS = 5  # room for "YES", "No." and an end token
QUESTIONS = {
    "politer": (
        "Is Response B noticeably MORE POLITE than Response A (more courteous, warmer, more "
        "deferential: thanks, please, apologies, well-wishing)?"
    ),
    "ruder": (
        "Is Response B noticeably RUDER or MORE CURT than Response A (blunter, dismissive, "
        "less courteous, stripped of pleasantries)?"
    ),
}
TEMPLATE = (
    "You compare the tone of two answers to the same question. Ignore their content and "
    "correctness; judge only politeness.\n\nResponse A:\n{base}\n\nResponse B:\n{response}\n\n"
    "{question} Answer YES or NO only."
)

# Complete: (conversations, max_tokens) -> list of (answer text or None, failure or None)
Complete = Callable[[list[list[dict[str, str]]], int], list[tuple[str | None, str | None]]]


@dataclass(frozen=True)
class JudgeRequest:
    strength: float
    response: str
    base: str

    @property
    def direction(self) -> str:
        return "politer" if self.strength > 0 else "ruder"


def judge_prompt(request: JudgeRequest) -> str:
    return TEMPLATE.format(
        base=request.base, response=request.response, question=QUESTIONS[request.direction]
    )


def parse_verdict(text: str) -> int | None:
    """1 for a clear YES, 0 for a clear NO, None for anything else (both, neither, hedged)."""
    words = set(re.findall(r"[a-z]+", text.lower()))
    yes, no = "yes" in words, "no" in words
    first = re.match(r"\W*([a-z]+)", text.lower())
    if yes == no:
        return None
    if first and first.group(1) not in ("yes", "no"):
        return None  # "Maybe yes" or a sentence: not a clear verdict
    return 1 if yes else 0


class RegisterJudge:
    def __init__(self, identity: str, complete: Complete, cache: JsonCache) -> None:
        self.identity = identity
        self.complete = complete
        self.cache = cache

    def _key(self, request: JudgeRequest) -> str:
        return JsonCache.key(
            self.identity, JUDGE_PROMPT_VERSION, request.direction, request.base, request.response
        )

    def judge(self, requests: Sequence[JudgeRequest]) -> list[Mirroring]:
        verdicts: dict[int, Mirroring] = {}
        pending: list[int] = []
        for i, request in enumerate(requests):
            cached = self.cache.get(self._key(request))
            if isinstance(cached, dict) and "raw" in cached:
                verdicts[i] = _mirroring(cached["raw"])
            else:
                pending.append(i)
        if pending:
            conversations = [
                [{"role": "user", "content": judge_prompt(requests[i])}] for i in pending
            ]
            for i, (raw, failure) in zip(
                pending, self.complete(conversations, JUDGE_MAX_TOKENS), strict=True
            ):
                if failure is not None or raw is None:
                    verdicts[i] = Mirroring(None, None, f"{JUDGE_CALL_FAILED}: {failure}")
                    continue
                self.cache.put(self._key(requests[i]), {"raw": raw, "judge": self.identity})
                verdicts[i] = _mirroring(raw)
        return [verdicts[i] for i in range(len(requests))]


def _mirroring(raw: str) -> Mirroring:
    verdict = parse_verdict(raw)
    if verdict is None:
        return Mirroring(None, None, f"judge answer unparseable: {raw.strip()[:60]!r}")
    return Mirroring(verdict, 0)
