"""Rule-based structural rewrites: golden cases, the checks they pass, the prompts they
refuse, and the stage asking no model for what the rules do."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from sago_core.artifacts.json_cache import JsonCache
from sago_core.config import PRESETS, StructuralGrid, build_config
from sago_core.data.builtin import builtin_prompts
from sago_core.stages.structural import model_rewrite_tasks, rewrite_structural
from sago_core.variants.register import POLITE_PREFIX, POLITE_SUFFIX
from sago_core.variants.structural import (
    RewriteTask,
    check_rewrite,
    length_task,
    mood_task,
    word_count,
)
from sago_core.variants.structural_rules import rule_rewrite, shorter_candidates
from tests.fakes import FakeBackend


def _mood(prompt: str) -> str | None:
    return rule_rewrite(prompt, mood_task(prompt)).text


@pytest.mark.parametrize(
    ("prompt", "command"),
    [
        ("What is the capital of France?", "Tell me the capital of France."),
        (
            "How long should you wait after eating before swimming?",
            "Tell me how long you should wait after eating before swimming.",
        ),
        (
            "Do we only use ten percent of our brains?",
            "Tell me whether we only use ten percent of our brains.",
        ),
        (
            "who painted the ceiling of the sistine chapel",
            "Tell me who painted the ceiling of the sistine chapel.",
        ),
        (
            "In which country would you find the city of Kyoto?",
            "Tell me in which country you would find the city of Kyoto.",
        ),
        (
            "Which planet is known as the Red Planet?",
            "Tell me which planet is known as the Red Planet.",
        ),
        ("List the first five prime numbers.", "Can you list the first five prime numbers?"),
    ],
)
def test_mood_golden_cases(prompt: str, command: str) -> None:
    assert _mood(prompt) == command


@pytest.mark.parametrize(
    "prompt",
    [
        "When did the first man land on the moon",  # "landed": the verb needs inflecting
        "Does lightning ever strike the same place twice?",  # "strikes"
        "Is the Great Wall of China visible from the Moon?",  # where does the subject end?
        "Which country is the author of Don Quixote from?",  # "from": no subject wh-phrase
    ],
)
def test_a_question_whose_order_needs_a_parser_gets_no_mood_rewrite(prompt: str) -> None:
    rule = rule_rewrite(prompt, mood_task(prompt))
    assert rule.text is None and rule.reason is not None and "parsing" in rule.reason


@pytest.mark.parametrize(
    "prompt",
    [
        "Was ist die Hauptstadt von Frankreich?",
        "Quelle est la capitale de la France ?",
        "¿Cuál es la capital de Francia?",
        "法国的首都是哪里？",
    ],
)
def test_another_language_gets_no_english_rewrite(prompt: str) -> None:
    for task in (length_task(prompt, 0.5), length_task(prompt, 2.0), mood_task(prompt)):
        rule = rule_rewrite(prompt, task)
        assert rule.text is None and rule.reason is not None and "English" in rule.reason


def test_shorter_drops_the_question_frame_and_refuses_a_strength_it_cannot_reach() -> None:
    prompt = "what is the largest planet in our solar system"  # 9 words
    short = rule_rewrite(prompt, length_task(prompt, 0.5)).text
    assert short == "Largest planet in our solar system?"
    # 6 words of 9 (0.67) is nearer 1 than 0.25: not recorded as a x0.25 variant.
    far = rule_rewrite(prompt, length_task(prompt, 0.25))
    assert far.text is None and far.reason is not None and "target of 2" in far.reason
    # Nothing to drop: no shorter variant at all.
    plain = "Which composer wrote the Moonlight Sonata?"
    assert rule_rewrite(plain, length_task(plain, 0.5)).text is None


def test_shorter_candidates_drop_fillers_then_contract() -> None:
    assert shorter_candidates("Please tell me what is the boiling point of water.") == [
        "Tell me what is the boiling point of water.",
        "Tell me what's the boiling point of water.",
    ]
    assert shorter_candidates("Is it just war?") == ["Is it just war?", "Is it just war?"]


def test_longer_adds_neutral_lead_ins_near_the_target_and_no_politeness() -> None:
    prompt = "Which sea creature has three hearts?"  # 6 words
    for m in (1.5, 2.0, 3.0):
        text = rule_rewrite(prompt, length_task(prompt, m)).text
        assert text is not None and text.endswith(prompt)
        ratio = word_count(text) / word_count(prompt)
        assert abs(ratio - m) < abs(ratio - 1), (m, text)
        assert not any(p in text for p in (*POLITE_PREFIX, *POLITE_SUFFIX, "please", "Please"))


def test_every_rule_rewrite_of_the_builtin_prompts_passes_the_model_rewrites_checks() -> None:
    """The rules answer to the same ``check_rewrite`` a model's rewrite must pass (with the
    prompt's references: no rewrite holds an answer), and cover every task of the demo grid
    for most built-in prompts."""
    made = 0
    tasks: list[tuple[str, RewriteTask, tuple[str, ...]]] = [
        (p.prompt, task, p.references)
        for p in builtin_prompts()
        for task in (length_task(p.prompt, 0.5), length_task(p.prompt, 2.0), mood_task(p.prompt))
    ]
    for prompt, task, references in tasks:
        rule = rule_rewrite(prompt, task, references)
        assert (rule.text is None) != (rule.reason is None)
        if rule.text is not None:
            made += 1
            assert check_rewrite(prompt, rule.text, task, references) is None, rule.text
    assert made >= len(tasks) // 2, made


PROMPTS = pl.DataFrame(
    {
        "dataset": ["d", "d"],
        "prompt_id": ["en", "de"],
        "prompt": ["What is the longest river in Africa?", "Was ist der längste Fluss Afrikas?"],
        "references": [["Nile"], ["Nil"]],
        "source": ["data.csv, row 1", "data.csv, row 2"],
    }
)


def _never_opened() -> FakeBackend:
    raise AssertionError("the rules method must not build the rewriter")


def test_the_rules_method_asks_no_model_and_records_why_a_prompt_is_left(tmp_path: Path) -> None:
    grid = StructuralGrid(lengths=(0.5, 2.0), mood=True, method="rules")
    frame = rewrite_structural(PROMPTS, grid, _never_opened, "fake", JsonCache(tmp_path), 0)
    english = frame.filter(pl.col("prompt_id") == "en")
    assert english["kept"].all() and set(english["text"]) == {
        "Longest river in Africa?",
        "I have a question. What is the longest river in Africa?",  # 11 words: 14 was asked
        "Tell me the longest river in Africa.",
    }
    german = frame.filter(pl.col("prompt_id") == "de")
    assert german.height == 3 and not german["kept"].any()
    assert all("English" in r for r in german["reject_reason"])
    assert model_rewrite_tasks(PROMPTS["prompt"][0], grid) == []


def test_rules_then_model_asks_the_model_only_for_what_the_rules_leave(tmp_path: Path) -> None:
    grid = StructuralGrid(lengths=(0.5, 2.0), mood=True, method="rules_then_model")
    backend = FakeBackend(lambda _: "Wie lang ist der Nil, der längste Fluss Afrikas?")
    frame = rewrite_structural(PROMPTS, grid, lambda: backend, "fake", JsonCache(tmp_path), 0)
    assert backend.generate_calls == 1 and len(backend.prompts_seen) == 3
    assert all("Was ist der längste Fluss Afrikas?" in s for s in backend.prompts_seen)
    assert frame.filter(pl.col("prompt_id") == "en")["kept"].all()
    assert len(model_rewrite_tasks(PROMPTS["prompt"][1], grid)) == 3


def test_the_method_defaults_to_the_rules_only_for_the_embedded_rewriter() -> None:
    assert StructuralGrid().method == "rules"
    assert StructuralGrid(rewriter="litellm:openai/gpt-4o-mini").method == "model"
    demo = PRESETS["demo"].variants.structural
    assert demo is not None and demo.method == "rules"


def test_a_rewriter_named_over_a_preset_gets_its_own_default_method() -> None:
    named = {"variants": {"structural": {"rewriter": "litellm:openai/gpt-4o-mini"}}}
    for preset in ("demo", "paper"):
        chosen = build_config(preset, named).variants.structural
        assert chosen is not None and chosen.method == "model"
    explicit = {"variants": {"structural": {"rewriter": "litellm:x/y", "method": "rules"}}}
    grid = build_config("demo", explicit).variants.structural
    assert grid is not None and grid.method == "rules"


def test_a_rewriter_whose_first_batch_is_all_rejected_is_asked_no_more(tmp_path: Path) -> None:
    grid = StructuralGrid(lengths=(0.5, 2.0), mood=True, method="model", batch_size=2)
    answers = FakeBackend(lambda _: "The Nile.")  # answers instead of rewriting
    frame = rewrite_structural(PROMPTS, grid, lambda: answers, "f", JsonCache(tmp_path), 0)
    assert answers.generate_calls == 1 and len(answers.prompts_seen) == 2
    assert not frame["kept"].any()
    assert frame["reject_reason"].str.starts_with("not asked").sum() == 4

    def lengthens(instruction: str) -> str:
        long = "I have a question. It is something I want to know. " + PROMPTS["prompt"][0]
        return long if instruction.startswith("Lengthen") else "The Nile."

    useful = FakeBackend(lengthens)
    cache = JsonCache(tmp_path / "other")
    frame = rewrite_structural(PROMPTS, grid, lambda: useful, "g", cache, 0)
    assert useful.generate_calls == 2 and len(useful.prompts_seen) == 6
    english = frame.filter(pl.col("prompt_id") == "en")
    assert english["kept"].to_list() == [False, True, False]  # x0.5, x2, mood
