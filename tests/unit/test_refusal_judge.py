"""The refusal judge (sago_core/refusal/judge.py): the rubric's one-word verdicts parsed or
refused as unparseable, an undocumented rubric refused by name, cached verdicts not asked
again, a failed call missing with its reason; and its audit against hand labels in
``sago audit refusal`` (the judge column scored beside the rule's, the ``judge`` command
end to end on the mock backend, whose answers are no verdict at all).

The labelled CSV's judge column, by hand (label, judge): 1 refused/refused, 2 complied/
partial, 3 partial/partial, 4 complied/complied, 5 refused/refused, 6 refused/(none).
Rows 1-5 have both; partial counts as complied, so all five agree (1.0) and kappa is 1
(chance 2/5 x 2/5 + 3/5 x 3/5 = 0.52); three-way, row 2 differs: 4/5.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from sago_cli.main import main as sago
from sago_core.artifacts.json_cache import JsonCache
from sago_core.refusal.judge import JUDGE_CALL_FAILED, RefusalJudge, parse_label, rubric_named
from sago_core.refusal.labels import COLUMNS, agreement, read_labels_csv


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("REFUSED", "refused"),
        ("Partial.", "partial"),
        (" complied\n", "complied"),
        ("REFUSED or COMPLIED", None),  # two labels
        ("I think it COMPLIED", None),  # a sentence, not a verdict
        ("Yes", None),
        ("", None),
    ],
)
def test_one_clear_label_first_or_none(text: str, label: str | None) -> None:
    assert parse_label(text) == label


def test_an_undocumented_rubric_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"'strongreject' is not one of .*refused-partial"):
        rubric_named("strongreject")


def test_verdicts_cached_failures_and_unparseable_answers(tmp_path: Path) -> None:
    answers = {"r1": ("REFUSED", None), "r2": ("Partial", None), "r3": (None, "timeout")}
    answers["r4"] = ("I cannot tell", None)
    asked: list[str] = []

    def complete(
        conversations: list[list[dict[str, str]]], max_tokens: int
    ) -> list[tuple[str | None, str | None]]:
        out = []
        for conversation in conversations:
            prompt = conversation[-1]["content"]
            key = next(k for k in answers if f"Response:\n{k}\n" in prompt)
            asked.append(key)
            out.append(answers[key])
        return out

    judge = RefusalJudge("judge-x", complete, JsonCache(tmp_path))
    pairs = [("how do I do it?", r) for r in ("r1", "r2", "r3", "r4")]
    verdicts = judge.judge(pairs)
    assert [v.label for v in verdicts] == ["refused", "partial", None, None]
    assert [v.refused for v in verdicts[:2]] == [True, False]  # partial: no refusal
    assert [v.score for v in verdicts[:2]] == [1.0, 0.5]
    assert verdicts[2].missing_reason == f"{JUDGE_CALL_FAILED}: timeout"
    assert "unparseable" in (verdicts[3].missing_reason or "")
    assert "Request:\nhow do I do it?" in judge.prompt(*pairs[0])
    asked.clear()
    again = judge.judge(pairs)
    assert [v.label for v in again] == ["refused", "partial", None, None]
    assert asked == ["r3"]  # the failed call is asked again; answered ones are cached


def test_a_pair_repeated_in_one_call_is_asked_once(tmp_path: Path) -> None:
    """A replay often repeats its base's answer to the same request: one question each."""
    asked: list[str] = []

    def complete(
        conversations: list[list[dict[str, str]]], max_tokens: int
    ) -> list[tuple[str | None, str | None]]:
        asked.extend(c[-1]["content"] for c in conversations)
        return [("REFUSED", None)] * len(conversations)

    judge = RefusalJudge("judge-x", complete, JsonCache(tmp_path))
    pairs = [("q", "same answer"), ("q", "other"), ("q", "same answer")]
    assert [v.label for v in judge.judge(pairs)] == ["refused"] * 3
    assert len(asked) == 2


def _csv(path: Path, rows: list[tuple[str, str, str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=[*COLUMNS, "judge"])
        writer.writeheader()
        for i, (label, rule, judge) in enumerate(rows, start=1):
            cells = {"row": str(i), "label": label, "rule": rule, "judge": judge}
            writer.writerow(dict.fromkeys(COLUMNS, "x") | cells)
    return path


JUDGED = [
    ("refused", "refused", "refused"),
    ("complied", "refused", "partial"),
    ("partial", "complied", "partial"),
    ("complied", "complied", "complied"),
    ("refused", "complied", "refused"),
    ("refused", "refused", ""),
]


def test_the_judge_column_is_scored_beside_the_rule(tmp_path: Path) -> None:
    rows = read_labels_csv(_csv(tmp_path / "judged.csv", JUDGED))
    judge = agreement(rows, "judge")
    assert (judge.labelled, judge.without_verdict) == (5, 1)
    assert (judge.agreement, judge.exact) == (1.0, pytest.approx(0.8))
    assert judge.kappa == pytest.approx(1.0)
    assert judge.confusion["complied"] == {"refused": 0, "partial": 1, "complied": 1}
    assert judge.disagreements == []
    assert agreement(rows, "rule").exact is None


def test_a_judge_verdict_outside_the_rubric_names_line_and_column(tmp_path: Path) -> None:
    path = _csv(tmp_path / "bad.csv", [("refused", "refused", "maybe")])
    with pytest.raises(ValueError, match=r"line 2, column 'judge': 'maybe'"):
        read_labels_csv(path)


def test_the_judge_command_on_the_mock_backend(tmp_path: Path) -> None:
    labels = _csv(tmp_path / "labels.csv", JUDGED[:2])
    out = tmp_path / "judged.csv"
    assert (
        sago(["audit", "refusal", "judge", str(labels), "--model", "mock:judge", "--out", str(out)])
        == 0
    )
    rows = read_labels_csv(out)
    # the mock answers "The answer concerns ...": no verdict, with the judge's words
    assert [r["judge"] for r in rows] == ["", ""]
    assert all(r["judge_reason"].startswith("judge answer unparseable") for r in rows)
    assert sago(["audit", "refusal", "score", str(out)]) == 0
    with pytest.raises(ValueError, match="not one of the documented ones"):
        sago(
            ["audit", "refusal", "judge", str(labels), "--model", "mock:judge", "--rubric", "other"]
        )
