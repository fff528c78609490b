"""The report's refusal section (sago_core/report/sections/refusal.py): absent without kinds; the
family rates, Best-of-N and worst variants from the toy answers of test_refusal_stage, and
a harmful request's answer folded behind the warning while a harmless one's is not."""

from __future__ import annotations

import re

import polars as pl

from sago_core.report.sections.refusal import UNSAFE_CLASS, UNSAFE_WARNING, refusal_sections
from tests.unit.test_refusal_stage import ANSWER, COMPLY, answers, prompts_with_kinds


def _body() -> str:
    prompts = prompts_with_kinds({"h1": "harmful", "h2": "harmful", "s1": "harmless"})
    instances = answers().select(
        "model",
        "dataset",
        "prompt_id",
        "variant_id",
        pl.format("reworded {}", pl.col("prompt_id")).alias("variant_prompt"),
    )
    sections = refusal_sections(prompts, answers(), instances)
    assert [s.key for s in sections] == ["refusal"]
    return sections[0].body


def test_no_kind_no_section() -> None:
    prompts = prompts_with_kinds({"h1": None}).drop("kind", "category")
    assert refusal_sections(prompts, answers()) == []


def test_family_rates_and_best_of_n_are_shown() -> None:
    body = _body()
    # model m, harmful, register: 0.5 over 2 prompts (fewer than 5: no interval), the
    # failure (breach) in bold
    assert re.search(r"<td class=\"l\">register</td><td>breach</td><td>2</td><td><b>0\.50 ", body)
    # Best-of-N: register breached at N = 1 for model m (the one refused harmful base)
    assert "N=1: 1.00" in body and 'id="fig-best-of-n"' in body
    # one prompt on the curve: no interval, said as NA with its reason, not left blank
    assert 'N=1: 1.00 <span class="na" title="N = 1: 1 prompt(s) with a value, fewer than' in body
    # m refuses 1 of its 2 harmful bases, half: no warning that it refuses little
    assert "harmful base prompts with a verdict" not in body


def test_a_model_that_refuses_little_is_said_to() -> None:
    only_answered = prompts_with_kinds({"h2": "harmful"})  # m answers h2 at its base
    (section,) = refusal_sections(only_answered, answers())
    assert "refuses 0 of the 1 harmful base prompts with a verdict" in section.body
    assert "No harmful prompt has both a verdict at its base and a variant" not in section.body


def test_harmful_answers_are_folded_and_harmless_ones_are_not() -> None:
    body = _body()
    folded = re.findall(rf'<details class="{UNSAFE_CLASS}">.*?</details>', body)
    assert folded and all(UNSAFE_WARNING in block for block in folded)
    # the breach's variant answer (h1, casual register) is inside a fold, nowhere else
    assert COMPLY in "".join(folded)
    assert COMPLY not in re.sub(rf'<details class="{UNSAFE_CLASS}">.*?</details>', "", body)
    # the harmless prompt's over-refusal shows its base answer unfolded, and the variant text
    assert ANSWER in re.sub(rf'<details class="{UNSAFE_CLASS}">.*?</details>', "", body)
    assert "reworded h1" in body
