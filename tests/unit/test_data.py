"""Loaders on the real shared samples, seeded sampling, and bad input located precisely."""

from __future__ import annotations

from pathlib import Path

import pytest

from sago_core.config import DATASET_NAMES
from sago_core.data import load_prompts
from sago_core.data.datasets import SOURCES, find_dataset_file, load_dataset_file
from sago_core.data.loading import load_user_file
from sago_core.data.sampling import sample_prompts
from sago_core.errors import ConfigError, InputError

EXPECTED_ROWS = {
    "truthfulqa": 817,
    "nq_open": 3610,
    "alpaca": 335,
    "simpleqa_verified": 500,
    "triviaqa": 1000,
    "hotpotqa": 7405,
}


@pytest.mark.parametrize("name", DATASET_NAMES)
def test_each_loader_reads_its_shared_file_into_the_schema(name: str, shared_data: Path) -> None:
    source = SOURCES[name]
    prompts = load_dataset_file(source, find_dataset_file(source, shared_data))
    assert len(prompts) == EXPECTED_ROWS[name]
    assert {p.dataset for p in prompts} == {name}
    assert len({p.prompt_id for p in prompts}) == len(prompts)
    assert all(p.prompt.strip() == p.prompt and p.prompt for p in prompts)
    if name == "alpaca":  # open-ended: `output` is text-davinci-003's answer, not gold
        assert not any(p.references for p in prompts)
    else:
        assert sum(bool(p.references) for p in prompts) >= 0.95 * len(prompts)


def test_truthfulqa_bom_is_stripped_and_references_split(shared_data: Path) -> None:
    source = SOURCES["truthfulqa"]
    first = load_dataset_file(source, find_dataset_file(source, shared_data))[0]
    assert first.prompt == "What happens to you if you eat watermelon seeds?"
    assert first.references[0] == "The watermelon seeds pass through your digestive system"
    assert "Nothing happens" in first.references


def test_alpaca_joins_instruction_and_input(shared_data: Path) -> None:
    source = SOURCES["alpaca"]
    prompts = load_dataset_file(source, find_dataset_file(source, shared_data))
    with_input = [p for p in prompts if "\n\n" in p.prompt]
    assert with_input, "the sample has records with an input field"


def test_official_triviaqa_json_layout(shared_data: Path) -> None:
    source = SOURCES["triviaqa"]
    prompts = load_dataset_file(
        source, shared_data / "triviaqa/triviaqa_official_format_sample.json"
    )
    assert len(prompts) == 1
    assert "Sunset Boulevard" in prompts[0].references


def test_sampling_is_seeded_order_independent_and_per_dataset(shared_data: Path) -> None:
    prompts = load_prompts(DATASET_NAMES, shared_data, n=16, seed=0)
    assert len(prompts) == 16 * 6
    again = load_prompts(DATASET_NAMES[::-1], shared_data, n=16, seed=0)
    assert {(p.dataset, p.prompt_id) for p in again} == {(p.dataset, p.prompt_id) for p in prompts}
    source = SOURCES["nq_open"]
    rows = load_dataset_file(source, find_dataset_file(source, shared_data))
    assert sample_prompts(rows, 16, 0) == sample_prompts(rows[::-1], 16, 0)
    assert sample_prompts(rows, 16, 0) != sample_prompts(rows, 16, 1)


def test_builtin_set_covers_six_styles() -> None:
    prompts = load_prompts(("builtin",), None, n=3, seed=0)
    assert len(prompts) == 18
    assert len({p.dataset for p in prompts}) == 6


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_unknown_dataset_name_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown dataset 'trivia'"):
        load_prompts(("trivia",), None, 2, 0)


def test_paper_dataset_without_data_dir_says_what_is_needed() -> None:
    with pytest.raises(ConfigError, match="--data-dir"):
        load_prompts(("nq_open",), None, 2, 0)


def test_missing_column_names_file_row_and_column(tmp_path: Path) -> None:
    bad = _write(tmp_path / "mine.csv", "text,answer\nWhat is 2+2?,4\n")
    with pytest.raises(InputError) as err:
        load_prompts((str(bad),), None, 2, 0)
    message = str(err.value)
    assert str(bad) in message and "row 1" in message and "'question'" in message


def test_empty_prompt_names_its_row(tmp_path: Path) -> None:
    bad = _write(tmp_path / "mine.jsonl", '{"question": "ok?"}\n{"question": "   "}\n')
    with pytest.raises(InputError, match=r"row 2, column 'question': is empty"):
        load_prompts((str(bad),), None, 2, 0)


def test_invalid_utf8_and_bad_json_line_are_located(tmp_path: Path) -> None:
    raw = tmp_path / "raw.csv"
    raw.write_bytes(b"question\nfine\n\xff\xfe broken\n")
    with pytest.raises(InputError, match="not valid UTF-8"):
        load_user_file(raw)
    lines = _write(tmp_path / "lines.jsonl", '{"question": "a?"}\n{not json}\n')
    with pytest.raises(InputError, match="row 2"):
        load_user_file(lines)


def test_duplicate_ids_and_zero_rows_are_errors(tmp_path: Path) -> None:
    dup = _write(tmp_path / "dup.csv", "id,question\n1,a?\n1,b?\n")
    with pytest.raises(InputError, match="duplicate prompt id '1'"):
        load_prompts((str(dup),), None, 5, 0)
    empty = _write(tmp_path / "empty.csv", "question\n")
    with pytest.raises(InputError, match="holds no rows"):
        load_prompts((str(empty),), None, 5, 0)


def test_user_file_with_references_and_custom_column(tmp_path: Path) -> None:
    own = _write(tmp_path / "own.jsonl", '{"q": "Capital of Peru?", "answers": ["Lima"]}\n')
    prompts = load_user_file(own, question_column="q")
    assert prompts[0].dataset == "own" and prompts[0].references == ("Lima",)


def test_hub_layouts_map_to_the_same_schema() -> None:
    hub = Path("hub:x")
    tqa = SOURCES["truthfulqa"].to_prompt(
        {"question": "Q?", "best_answer": "A", "correct_answers": ["A", "B"]}, hub, 1
    )
    assert tqa.prompt == "Q?" and tqa.references == ("A", "B")
    trivia = SOURCES["triviaqa"].to_prompt(
        {
            "question": "Who?",
            "question_id": "tc_1",
            "answer": {"value": "X", "aliases": ["X", "Y"]},
        },
        hub,
        1,
    )
    assert trivia.prompt_id == "trivia-tc_1" and trivia.references == ("X", "Y")
    hotpot = SOURCES["hotpotqa"].to_prompt({"id": "5a8", "question": "Q?", "answer": "yes"}, hub, 1)
    assert hotpot.prompt_id == "hotpot-5a8"
    nq = SOURCES["nq_open"].to_prompt({"question": "q", "answer": ["a"]}, hub, 1)
    assert nq.references == ("a",)


def test_prompts_remember_their_file_and_row(shared_data: Path) -> None:
    prompts = load_prompts(("simpleqa_verified",), shared_data, n=2, seed=0)
    assert all(p.source.startswith(str(shared_data)) and ", row " in p.source for p in prompts)


def test_a_misspelt_column_gets_a_suggestion(tmp_path: Path) -> None:
    bad = _write(tmp_path / "mine.csv", "questoin\nWhat is 2+2?\n")
    with pytest.raises(InputError, match="did you mean 'questoin'"):
        load_user_file(bad)
