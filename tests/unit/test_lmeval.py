"""`sago score` on lm-evaluation-harness `--log_samples` JSONL (0.4.x's written form). The
fixtures under tests/fixtures/external/lmeval/ are this project's own lines built from
lm_eval/evaluator.py's sample dict and evaluation_tracker.py's writer: two documents, three
templates (tasks) each, concatenated with a `task` field; a generate_until benchmark (with a
second filter's line and an empty generation) and a multiple-choice one (log-likelihoods per
choice). More fixtures, built the same way: `capitals_3templates_chat.jsonl`, a
chat-API model's run (`arguments` holding the chat messages as a JsonChatStr, a system turn,
answers holding U+2028 and U+2029 written raw as `ensure_ascii=False` writes them) of three
templates `capitals_prompt_<n>`; `capitals_plain_0shot_2shot.jsonl`, one template's 0-shot and
2-shot runs joined, each with two filters' lines. Expected values are read off the fixtures
by hand."""

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
CHAT = LMEVAL / "capitals_3templates_chat.jsonl"
RUNS = LMEVAL / "capitals_plain_0shot_2shot.jsonl"
SYSTEM = "You are a geography quiz assistant. Answer with the city only."


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
    assert {r.dataset for r in table.rows} == {"capitals"}  # the tasks' benchmark
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


def _json_lines(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    return [json.loads(line) for line in text.split("\n") if line.strip()]


def test_a_chat_api_models_messages_give_the_user_turn_as_prompt(tmp_path: Path) -> None:
    # written with ensure_ascii (U+2028 escaped): only the chat messages are under test here
    path = _write(tmp_path / "chat.jsonl", _json_lines(CHAT))
    first = _json_lines(CHAT)[0]["arguments"]["gen_args_0"]["arg_0"]
    assert isinstance(first, list) and len(first) == 1  # the JsonChatStr as lm-eval writes it
    table = _read(path)
    rows = _by(table)
    assert len(table.rows) == 6
    assert rows[("0", "base")].prompt_text == "Question: What is the capital of France?\nAnswer:"
    polite = rows[("1", "lm-eval:capitals_prompt_2")].prompt_text
    assert polite == "Please answer the following question.\nWhat is the capital of Japan?"
    assert all(SYSTEM not in r.prompt_text for r in table.rows)  # the system turn is context
    from sago_core.external.lmeval import CHAT_PROMPTS, SYSTEM_TURNS

    assert table.notes[CHAT_PROMPTS] == 6 and table.notes[SYSTEM_TURNS] == 6
    assert rows[("1", "lm-eval:capitals_prompt_3")].references == ("Tokyo",)


def test_json_lines_split_on_newlines_only() -> None:
    table = _read(CHAT)  # the answers hold U+2028 and U+2029 as written, not escaped
    rows = _by(table)
    assert len(table.rows) == 6
    answer = rows[("0", "lm-eval:capitals_prompt_2")].response_text
    assert answer == "The capital of France is Paris.\u2028It has been since 987."
    assert rows[("1", "lm-eval:capitals_prompt_3")].response_text == "T\u014dky\u014d\u2029"
    from sago_core.data.jsonl import lines

    text = "a\u2028b\u0085c\u2029d\x0be\x0cf\x1cg\r\nsecond\n\nthird"
    assert list(lines(text)) == [
        (1, "a\u2028b\u0085c\u2029d\x0be\x0cf\x1cg"),
        (2, "second"),
        (4, "third"),
    ]


def test_a_0shot_and_a_2shot_run_joined_are_a_base_and_its_fewshot_variant() -> None:
    table = read_external(ExternalSource(path=RUNS))  # no --family: few-shot is its own family
    rows = _by(table)
    lines = _json_lines(RUNS)
    assert len(lines) == 12  # 2 runs x 2 filters x 3 documents
    assert len(table.rows) == 6  # every run's answer kept: 3 bases, 3 two-shot variants
    assert table.notes[FURTHER_FILTERS] == 6  # the strict-match lines repeat the generations
    fewshot = rows[("2", "lm-eval:capitals_plain|fewshot:2")]
    assert fewshot.variant is not None
    assert (fewshot.variant.family, fewshot.variant.subtype) == ("fewshot", "shots")
    assert (fewshot.variant.strength, fewshot.variant.position) == (2.0, "prefix")
    assert fewshot.response_text == " Nairobi"
    assert rows[("2", "base")].response_text == " Nairobi, Kenya"
    assert fewshot.prompt_text.startswith("Question: What is the capital of Italy?\nAnswer: Rome")
    assert rows[("2", "base")].prompt_text == "Question: What is the capital of Kenya?\nAnswer:"


def test_a_named_number_of_shots_wins_over_counting(tmp_path: Path) -> None:
    lines = _json_lines(RUNS)
    for line in lines:
        line["num_fewshot"] = 0 if line["arguments"]["gen_args_0"]["arg_0"].count("Q") == 1 else 5
    rows = _by(_read(_write(tmp_path / "named.jsonl", lines)))
    assert rows[("0", "lm-eval:capitals_plain|fewshot:5")].variant.strength == 5.0


def test_lines_of_two_models_are_two_models(tmp_path: Path) -> None:
    lines = _json_lines(RUNS)
    other = [{**line, "resps": [["Somewhere"]]} for line in lines]
    joined = [{**line, "model": "gemma-2b"} for line in lines] + [
        {**line, "model": "qwen3-8b"} for line in other
    ]
    table = _read(_write(tmp_path / "models.jsonl", joined))
    assert len(table.rows) == 12 and table.notes[FURTHER_FILTERS] == 12
    assert {r.model for r in table.rows} == {"gemma-2b", "qwen3-8b"}
    assert _by(table)[("0", "base")].model in {"gemma-2b", "qwen3-8b"}
    qwen = [r for r in table.rows if r.model == "qwen3-8b"]
    assert {r.response_text for r in qwen} == {"Somewhere"}


def test_one_prompt_answered_twice_differently_is_an_error_not_a_filter(tmp_path: Path) -> None:
    lines = _json_lines(RUNS)
    lines[3]["resps"] = [[" Lyon"]]  # doc 0, strict-match: the same prompt, another answer
    with pytest.raises(InputError, match=r"answered twice .* \(rows 1 and 4\)") as caught:
        _read(_write(tmp_path / "twice.jsonl", lines))
    assert caught.value.column == "resps" and "\n" not in str(caught.value)


def test_a_joined_file_is_named_after_its_benchmark() -> None:
    table = _read(GENERATE)  # tasks capitals_plain, capitals_polite, capitals_terse
    assert {r.dataset for r in table.rows} == {"capitals"}  # not the file's name
    assert all(r.source.startswith(f"{GENERATE}:") for r in table.rows)  # the file: the source
    assert {r.dataset for r in _read(CHAT).rows} == {"capitals"}  # capitals_prompt_<n>
    from sago_core.external.lmeval import benchmark_name

    names = [f"masakhaner_luo_prompt_{n}" for n in range(1, 6)]
    assert benchmark_name(names, "masakhaner_luo_5templates_0shot") == "masakhaner_luo"
    assert benchmark_name(["truthfulqa_gen"], "x") == "truthfulqa_gen"
    assert benchmark_name(["arc_easy", "boolq"], "joined") == "joined"


def test_a_system_turn_that_differs_between_templates_stays_in_the_prompt(
    tmp_path: Path,
) -> None:
    lines = _json_lines(CHAT)
    for line in lines:
        if line["task"] == "capitals_prompt_3":  # a template that is a system instruction
            args = line["arguments"]["gen_args_0"]
            args["arg_0"] = [args["arg_0"][0].replace(SYSTEM, "Answer in French.")]
    table = _read(_write(tmp_path / "systems.jsonl", lines))
    rows = _by(table)
    terse = rows[("0", "lm-eval:capitals_prompt_3")].prompt_text
    assert terse == "Answer in French.\n\nWhat is the capital of France? Reply in one word."
    assert rows[("0", "base")].prompt_text.startswith(SYSTEM + "\n\nQuestion:")
    from sago_core.external.lmeval import SYSTEMS_DIFFER

    assert table.notes[SYSTEMS_DIFFER] == 2


def test_templates_still_need_a_family_but_a_fewshot_run_does_not() -> None:
    with pytest.raises(InputError, match=r"task 'capitals_polite'\): give --family"):
        read_external(ExternalSource(path=GENERATE))
    assert read_external(ExternalSource(path=RUNS)).format == "lm-eval"


def test_another_prompt_of_a_task_that_adds_no_demonstrations_is_a_run_of_its_own(
    tmp_path: Path,
) -> None:
    lines = _json_lines(RUNS)[:6]  # the 0-shot run
    again = []
    for line in lines[:3]:  # the same task asked with an instruction after the question
        args = line["arguments"]["gen_args_0"]
        args = {**args, "arg_0": args["arg_0"] + " Think step by step.\n\nFinal answer:"}
        again.append({**line, "arguments": {"gen_args_0": args}, "resps": [[" Paris?"]]})
    rows = _by(_read(_write(tmp_path / "cot.jsonl", lines + again)))
    variant = rows[("0", "lm-eval:capitals_plain#2")].variant
    assert variant is not None and (variant.family, variant.subtype) == ("structural", "template")
    with pytest.raises(InputError, match="give --family"):
        read_external(ExternalSource(path=tmp_path / "cot.jsonl"))


def test_one_documents_demonstrations_are_counted_by_lm_evals_delimiter(tmp_path: Path) -> None:
    lines = [line for line in _json_lines(RUNS) if line["doc_id"] == 0]  # no template to compare
    rows = _by(read_external(ExternalSource(path=_write(tmp_path / "one.jsonl", lines))))
    assert set(rows) == {("0", "base"), ("0", "lm-eval:capitals_plain|fewshot:2")}
