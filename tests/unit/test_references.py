"""Gold answers only, and multi-word placeholders.

Alpaca and AlpacaEval hold open-ended instructions whose ``output`` is another model's
answer (text-davinci-003): it must not become a reference answer, so correctness on them is
missing, unless the user names a gold column. ``reference_origins`` says per dataset where
the references come from. The placeholder heuristic flags ``{your answer}`` and still
leaves LaTeX and code braces alone."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from sago_core.data.datasets import (
    NO_GOLD_ALPACA,
    SOURCES,
    find_dataset_file,
    load_dataset_file,
)
from sago_core.data.loading import load_prompts, load_user_file
from sago_core.data.placeholders import find_placeholders
from sago_core.data.records import PromptRules
from sago_core.data.references import reference_lines, reference_origins
from sago_core.errors import ConfigError, InputError
from sago_core.statistics.correctness import is_correct

ALPACA_EVAL_ROWS = [
    {
        "instruction": "What is the capital of France? Reply with {your answer} only.",
        "output": "The capital of France is Paris.",
        "generator": "text_davinci_003",
        "dataset": "helpful_base",
        "gold": "Paris",
    },
    {
        "instruction": "Simplify \\frac{a}{b} when a = 2b, and give $x^{2}$ for x = 3.",
        "output": "2 and 9",
        "generator": "text_davinci_003",
        "dataset": "helpful_base",
        "gold": "2",
    },
]


def _alpaca_eval(tmp_path: Path) -> Path:
    path = tmp_path / "alpaca_eval.json"
    path.write_text(json.dumps(ALPACA_EVAL_ROWS), encoding="utf-8")
    return path


def test_alpaca_output_is_not_a_reference_so_correctness_is_missing(shared_data: Path) -> None:
    path = find_dataset_file(SOURCES["alpaca"], shared_data)
    prompts = load_dataset_file(SOURCES["alpaca"], path)  # in file order
    rows = json.loads(path.read_text("utf-8"))
    assert len(prompts) == len(rows) == 335 and not any(p.references for p in prompts)
    assert sum(bool(r["output"].strip()) for r in rows) >= 330  # it holds davinci's answers
    # the davinci answer itself would be judged "right" against itself before; now unknown
    assert all(
        is_correct(r["output"], p.references) is None for p, r in zip(prompts, rows, strict=True)
    )


def test_alpaca_eval_file_has_no_references_unless_a_gold_column_is_named(tmp_path: Path) -> None:
    path = _alpaca_eval(tmp_path)
    plain = load_user_file(path)
    assert [p.references for p in plain] == [(), ()]
    gold = load_prompts((f"{path}#answer=gold",), None, 10, 0)
    by_text = {p.prompt: p for p in gold}
    first = by_text[ALPACA_EVAL_ROWS[0]["instruction"]]
    assert first.references == ("Paris",) and first.dataset == "alpaca_eval"
    assert is_correct("Paris", first.references) is True


def test_a_known_dataset_takes_a_named_gold_column(shared_data: Path) -> None:
    named = load_prompts(("alpaca#answer=output",), shared_data, n=5, seed=0)
    assert len(named) == 5 and all(p.references for p in named)
    with pytest.raises(InputError, match="gold column 'gold'") as caught:
        load_prompts(("alpaca#answer=gold",), shared_data, n=5, seed=0)
    assert caught.value.column == "gold"
    with pytest.raises(ConfigError, match="only '#answer=COLUMN'"):
        load_prompts(("alpaca#question=instruction",), shared_data, n=5, seed=0)


def test_reference_origins_say_which_column_or_why_none(shared_data: Path, tmp_path: Path) -> None:
    path = _alpaca_eval(tmp_path)
    own = tmp_path / "own.jsonl"
    own.write_text(json.dumps({"question": "2+2?", "answer": "4"}) + "\n", encoding="utf-8")
    bare = tmp_path / "bare.csv"
    bare.write_text("question\nHi?\n", encoding="utf-8")
    entries = (
        "builtin",
        "nq_open",
        "alpaca",
        "truthfulqa",
        "alpaca#answer=output",
        str(path),
        f"{path}#answer=gold",
        str(own),
        str(bare),
    )
    origins = {o.dataset: o for o in reference_origins(entries, shared_data)}
    assert origins["nq_open"].column is not None and "answer" in origins["nq_open"].column
    assert "Best Answer" in (origins["truthfulqa"].column or "")
    for no_gold in ("alpaca", str(path)):
        assert origins[no_gold].column is None and origins[no_gold].reason == NO_GOLD_ALPACA
    assert "column gold" in (origins[f"{path}#answer=gold"].column or "")
    assert "column output" in (origins["alpaca#answer=output"].column or "")
    assert origins[str(own)].column == "column answer"
    assert origins[str(bare)].column is None and "no 'answers'" in (origins[str(bare)].reason or "")
    lines = reference_lines(entries, shared_data)
    assert lines[0].startswith("Reference answers") and len(lines) == len(entries) + 1
    assert any("alpaca: no reference answers" in line for line in lines)


def test_a_multi_word_placeholder_in_an_alpaca_eval_row_is_flagged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _alpaca_eval(tmp_path)
    with caplog.at_level(logging.WARNING, logger="sago.data"):
        load_user_file(path)
    (record,) = caplog.records
    assert "{your answer}" in record.getMessage() and "row 1" in record.getMessage()
    assert "row 2" not in record.getMessage()  # LaTeX braces are not placeholders
    with pytest.raises(InputError, match="strict_placeholders") as caught:
        load_user_file(path, rules=PromptRules(strict_placeholders=True))
    assert caught.value.row == 1


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("Reply with {your answer} only.", ["{your answer}"]),
        ("Dear {{ first name }},", ["{{ first name }}"]),
        ("Write about {topic} in {number of words} words", ["{topic}", "{number of words}"]),
        ("\\frac{a}{b} and \\frac{your answer}{2}", []),
        ("What is $x^{2}$ and $\\sqrt{x y}$?", []),
        ("\\text{your answer} goes here", []),
        ('def f(): return {"a": 1}', []),
        ("What does {x: 1 for x in y} build?", []),
        ("And {x for x in y}?", []),
        ('Parse {"name": "Ada", "tags": ["a", "b"]} please', []),
        ("Set: {10, 3, 25, 6, 16}", []),
    ],
)
def test_placeholders_flag_several_words_but_not_latex_or_code(text: str, found: list) -> None:
    assert find_placeholders(text) == found
