"""`sago score` on lm-evaluation-harness `--log_samples` JSONL (0.4.x's written form). The
fixtures under tests/fixtures/external/lmeval/ are this project's own lines built from
lm_eval/evaluator.py's sample dict and evaluation_tracker.py's writer: two documents, three
templates (tasks) each, concatenated with a `task` field; a generate_until benchmark (with a
second filter's line and an empty generation) and a multiple-choice one (log-likelihoods per
choice). Expected values are read off the fixtures by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sago_core.errors import InputError
from sago_core.external.lmeval import FURTHER_FILTERS, LOGLIKELIHOODS, task_of_file
from sago_core.external.options import ExternalSource
from sago_core.external.read import ExternalTable, read_external

LMEVAL = Path(__file__).resolve().parents[1] / "fixtures" / "external" / "lmeval"
GENERATE = LMEVAL / "generate.jsonl"
CHOICE = LMEVAL / "multiple_choice.jsonl"


def _read(path: Path, **options: Any) -> ExternalTable:
    return read_external(ExternalSource(path=path, family="structural", **options))


def _by(table: ExternalTable) -> dict[tuple[str, str], Any]:
    return {(r.prompt_id, r.variant_id): r for r in table.rows}


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_generations_under_three_templates_become_base_and_variants() -> None:
    table = _read(GENERATE)
    assert table.format == "lm-eval"
    rows = _by(table)
    assert len(table.rows) == 6  # the strict-match line repeats doc 0's generation
    assert table.notes == {FURTHER_FILTERS: 1}
    assert rows[("0", "base")].prompt_text == "Question: What is the capital of France?\nAnswer:"
    assert rows[("0", "base")].response_text == " Paris"
    assert rows[("1", "lm-eval:capitals_terse")].response_text == " Kyoto"
    assert rows[("0", "lm-eval:capitals_polite")].response_text == " Paris, of course."
    empty = rows[("1", "lm-eval:capitals_polite")]  # generated "": an empty answer
    assert (empty.response_text, empty.failure_reason) == ("", None)
    variant = rows[("0", "lm-eval:capitals_terse")].variant
    assert variant is not None
    assert (variant.family, variant.subtype, variant.strength, variant.position) == (
        "structural",
        "template",
        1.0,
        "global",
    )
    assert rows[("1", "base")].references == ("Tokyo",)
    assert {r.dataset for r in table.rows} == {"capitals"}  # the tasks' benchmark (issue 41)
    assert {r.model for r in table.rows} == {"external"}


def test_the_user_names_the_base_template() -> None:
    rows = _by(_read(GENERATE, base_where=(("task", "capitals_terse"),)))
    assert rows[("1", "base")].response_text == " Kyoto"
    assert ("1", "lm-eval:capitals_plain") in rows
    with pytest.raises(InputError, match="not one of the file's"):
        _read(GENERATE, base_where=(("task", "capitals_shouty"),))


def test_multiple_choice_answers_are_the_most_likely_continuation() -> None:
    table = _read(CHOICE)
    rows = _by(table)
    assert rows[("0", "base")].response_text == " Paris"  # -0.7 of -4.1, -0.7, -3.9, -5.0
    assert rows[("0", "lm-eval:capitals_mc_quiz")].response_text == " Lyon"  # -1.1
    assert rows[("1", "lm-eval:capitals_mc_formal")].response_text == " Kyoto"  # -0.8
    assert rows[("1", "base")].response_text == " Tokyo"
    # the target is the gold choice's index: it names that continuation
    assert rows[("0", "base")].references == ("Paris",)
    assert rows[("1", "lm-eval:capitals_mc_quiz")].references == ("Tokyo",)
    assert table.notes == {LOGLIKELIHOODS: 6}


def test_a_document_under_one_template_only_is_refused(tmp_path: Path) -> None:
    # doc 1 under capitals_plain only: lines 1-2 (doc 0, two filters), 3 (doc 1), 4-5 (doc 0)
    lines = [
        line for line in _lines(GENERATE) if line["doc_id"] == 0 or line["task"] == "capitals_plain"
    ]
    with pytest.raises(InputError, match=r"base template and no other.*rows 3\)") as caught:
        _read(_write(tmp_path / "one.jsonl", lines))
    assert caught.value.row == 3 and "\n" not in str(caught.value)
    plain = [
        {k: v for k, v in line.items() if k != "task"}
        for line in _lines(GENERATE)
        if line["task"] == "capitals_plain"
    ]
    with pytest.raises(InputError, match="base template and no other"):  # one task's file
        _read(_write(tmp_path / "samples_capitals_plain_2024-06-01T12-00-00.jsonl", plain))


def test_one_doc_id_for_two_documents_is_an_error(tmp_path: Path) -> None:
    lines = _lines(GENERATE)
    lines[3]["doc_hash"] = "0" * 64
    with pytest.raises(InputError, match="names different documents") as caught:
        _read(_write(tmp_path / "clash.jsonl", lines))
    assert caught.value.column == "doc_hash"


def test_the_older_list_form_of_arguments_reads_the_same(tmp_path: Path) -> None:
    lines = _lines(GENERATE)
    for line in lines:
        line["arguments"] = [[req["arg_0"], req["arg_1"]] for req in line["arguments"].values()]
    old = _by(_read(_write(tmp_path / "old.jsonl", lines)))
    new = _by(_read(GENERATE))
    assert {k: (r.prompt_text, r.response_text) for k, r in old.items()} == {
        k: (r.prompt_text, r.response_text) for k, r in new.items()
    }


def test_task_name_from_the_samples_file_name() -> None:
    assert task_of_file("out/samples_arc_easy_2024-06-01T12-30-45.123456.jsonl") == "arc_easy"
    assert task_of_file("all.jsonl") == "all"


def test_a_certain_continuation_wins_over_less_likely_ones(tmp_path: Path) -> None:
    lines = _lines(CHOICE)
    first = lines[0]
    lls = ["-4.1", "-2.0", "0.0", "-5.0"]  # " Nice" has log-likelihood 0: probability 1
    first["resps"] = [[[ll, "False"]] for ll in lls]
    first["filtered_resps"] = [[ll, "False"] for ll in lls]
    rows = _by(_read(_write(tmp_path / "certain.jsonl", lines)))
    assert rows[("0", "base")].response_text == " Nice"
