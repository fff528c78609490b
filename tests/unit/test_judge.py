"""The register judge: strict YES/NO parsing, direction-specific questions, verdict cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from sago_core.artifacts.json_cache import JsonCache
from sago_core.axes.judge import JudgeRequest, RegisterJudge, judge_prompt, parse_verdict


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ("YES", 1),
        ("Yes.", 1),
        ("no", 0),
        (" NO!", 0),
        ("Yes, B is politer.", 1),
        ("Maybe yes", None),
        ("YES and NO", None),
        ("I cannot tell.", None),
        ("", None),
    ],
)
def test_only_a_clear_yes_or_no_counts(text: str, verdict: int | None) -> None:
    assert parse_verdict(text) == verdict


def test_questions_follow_the_direction() -> None:
    politer = judge_prompt(JudgeRequest(4, "Thanks so much!", "Paris."))
    ruder = judge_prompt(JudgeRequest(-4, "Paris. Obviously.", "Paris."))
    assert "MORE POLITE" in politer and "RUDER" not in politer
    assert "RUDER" in ruder and "Response B:\nParis. Obviously." in ruder


def test_verdicts_are_cached_and_unparseable_or_failed_ones_are_missing(tmp_path: Path) -> None:
    asked: list[str] = []
    replies = {"A": "YES", "B": "hmm, hard to say", "C": None}

    def complete(conversations: list, max_tokens: int) -> list:
        out = []
        for messages in conversations:
            text = messages[0]["content"]
            asked.append(text)
            key = text.split("Response B:\n", 1)[1][0]
            reply = replies[key]
            out.append((reply, None) if reply else (None, "rate_limited after 5 attempt(s)"))
        return out

    judge = RegisterJudge("api:judge@local", complete, JsonCache(tmp_path))
    requests = [JudgeRequest(2, r, "base") for r in ("A", "B", "C")]
    first = judge.judge(requests)
    assert (first[0].m_variant, first[0].m_base) == (1, 0)
    assert first[1].m_variant is None and "unparseable" in (first[1].missing_reason or "")
    assert first[2].m_variant is None and "rate_limited" in (first[2].missing_reason or "")
    assert len(asked) == 3
    judge.judge(requests)
    assert len(asked) == 4  # only the failed call is asked again; verdicts came from cache
    other = RegisterJudge("api:other-judge@local", complete, JsonCache(tmp_path))
    other.judge(requests[:1])
    assert len(asked) == 5  # another judge model is another cache entry
