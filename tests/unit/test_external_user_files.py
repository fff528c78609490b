"""User files in `sago run`: a file in one of the six datasets' own
layouts is read by that dataset's reader, columns map per file, and placeholder-like text
is a warning naming its rows (an error only when asked); LaTeX and code braces never count."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest

from sago_core.config import build_config
from sago_core.data.loading import load_prompts, load_user_file
from sago_core.data.placeholders import find_placeholders
from sago_core.data.records import PromptRules
from sago_core.data.user_files import join_mapped_entries
from sago_core.errors import ConfigError, InputError

ALPACA_EVAL = [
    {
        "instruction": "Write a LaTeX preamble: \\documentclass{article} \\usepackage{amsmath}",
        "output": "\\documentclass{article}\n\\usepackage{amsmath}",
        "generator": "text_davinci_003",
        "dataset": "helpful_base",
    },
    {
        "instruction": "What is x^{2} when x = 3?",
        "output": "9",
        "generator": "text_davinci_003",
        "dataset": "helpful_base",
    },
    {
        "instruction": "Fix this code: `if (x) { y }`",
        "output": "ok",
        "generator": "g",
        "dataset": "koala",
    },
]


def test_truthfulqa_in_its_official_layout_is_read_with_its_references(
    shared_data: Path, tmp_path: Path
) -> None:
    mine = shutil.copy(shared_data / "truthfulqa" / "TruthfulQA.csv", tmp_path / "tqa.csv")
    prompts = load_user_file(Path(mine))
    first = prompts[0]
    assert first.dataset == "tqa"
    assert first.prompt == "What happens to you if you eat watermelon seeds?"
    assert first.references[0] == "The watermelon seeds pass through your digestive system"
    assert "Nothing happens" in first.references
    assert first.source == f"{mine}, row 1"


def test_alpaca_eval_with_latex_is_accepted_without_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "alpaca_eval.json"
    path.write_text(json.dumps(ALPACA_EVAL), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="sago.data"):
        prompts = load_user_file(path, rules=PromptRules(strict_placeholders=True))
    assert [p.prompt for p in prompts] == [r["instruction"] for r in ALPACA_EVAL]
    assert prompts[0].references == ()  # `output` is another model's answer, not gold
    assert not caplog.records


def test_per_file_mapping_serves_two_layouts_in_one_run(tmp_path: Path) -> None:
    a = tmp_path / "a.csv"
    a.write_text("Question,Gold\nWhat is 2+2?,4\nCapital of Peru?,Lima\n", encoding="utf-8")
    b = tmp_path / "b.jsonl"
    b.write_text(json.dumps({"prompt": "Name a colour.", "key": "c1"}) + "\n", encoding="utf-8")
    entries = join_mapped_entries(
        [f"{a}#question=Question", "answer=Gold", f"{b}#question=prompt", "id=key", "builtin"]
    )
    assert entries == [
        f"{a}#question=Question,answer=Gold",
        f"{b}#question=prompt,id=key",
        "builtin",
    ]
    prompts = load_prompts(tuple(entries[:2]), None, 10, 0)
    by_text = {p.prompt: p for p in prompts}
    assert by_text["Capital of Peru?"].references == ("Lima",)
    assert by_text["Capital of Peru?"].dataset == "a"
    assert by_text["Name a colour."].prompt_id == "c1"
    config = build_config("demo", {"datasets": entries[:2]})  # the config's equivalent
    assert config.datasets == tuple(entries[:2])


def test_a_mapping_to_a_missing_column_names_file_and_column(tmp_path: Path) -> None:
    a = tmp_path / "a.csv"
    a.write_text("Question\nWhat is 2+2?\n", encoding="utf-8")
    with pytest.raises(InputError, match="did you mean 'Question'") as caught:
        load_prompts((f"{a}#question=Questoin",), None, 1, 0)
    assert caught.value.file == str(a) and caught.value.column == "Questoin"
    with pytest.raises(ConfigError, match="cannot be mapped"):
        load_prompts((f"{a}#prompt=Question",), None, 1, 0)


def test_placeholder_like_text_is_a_warning_naming_rows_unless_strict(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "q.jsonl"
    rows = ["Fine?", "What is the capital of {country}?", "Hello {{ name }}!"]
    path.write_text("".join(json.dumps({"question": q}) + "\n" for q in rows), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="sago.data"):
        prompts = load_user_file(path)
    assert len(prompts) == 3
    (record,) = caplog.records
    assert record.getMessage().startswith("2 prompt(s) hold placeholder-like text")
    assert "row 2" in record.getMessage() and "row 3" in record.getMessage()
    assert "{country}" in record.getMessage()
    with pytest.raises(InputError, match="strict_placeholders") as caught:
        load_user_file(path, rules=PromptRules(strict_placeholders=True))
    assert (caught.value.row, caught.value.column) == (2, "question")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="sago.data"):
        load_user_file(path, rules=PromptRules(allow_placeholders=True, strict_placeholders=True))
    assert not caplog.records


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("Answer {question} now", ["{question}"]),
        ("Hello {{ name }}!", ["{{ name }}"]),
        ("Use {x} and {y}", ["{x}", "{y}"]),
        ("What is the capital for {country}?", ["{country}"]),
        ("\\documentclass{article}\\usepackage[utf8]{inputenc}\\begin{document}", []),
        ("\\textbf{bold} about {topic}", ["{topic}"]),
        ("x^{n} + a_{i}", []),
        ("echo ${HOME}", []),
        ("Run `f'{x}'` please", []),
        ("if (x) { y }", []),
        ("function f() { body }", []),
        ("Explain:\n```\nprint(f'{i}')\n```\nthanks", []),
    ],
)
def test_placeholder_heuristic(text: str, found: list[str]) -> None:
    assert find_placeholders(text) == found
