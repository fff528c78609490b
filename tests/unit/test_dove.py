"""`sago score --format dove` on DOVE as SLAB-NLP/DOVE publishes it (schema.json and its
sample, DOVE_Lite's flat columns). The fixtures under tests/fixtures/external/dove/ are this
project's own records built from the published field names and value shapes: two MMLU
samples, three prompt variants each (instruction phrasing {name, text}, enumerator,
separator "; " or a newline, choices_order {method, description}, shots 0, demonstrations
[]), with cumulative_logprob and generated_tokens_logprobs. Every expected value below is
read off the fixture by hand."""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path
from typing import Any

import pytest

from sago_core.errors import InputError
from sago_core.external.dove import (
    CUMULATIVE_LOGPROB,
    TOKENS_FROM_LOGPROBS,
    parse_base_where,
    token_ids_from_logprobs,
)
from sago_core.external.options import ExternalSource
from sago_core.external.read import ExternalTable, read_external
from sago_core.external.schema import VariantKey

DOVE = Path(__file__).resolve().parents[1] / "fixtures" / "external" / "dove"
SAMPLE = DOVE / "sample.json"
TOPIC = "MultipleChoiceTemplatesInstructionsWithTopic"
STATE = "MultipleChoiceTemplatesInstructionsStateHere"
VARIANT_IDS = {
    "dove:enumerator=capitals",
    f"dove:instruction_phrasing={TOPIC}|separator=\\n",
}


def _read(path: Path, **options: Any) -> ExternalTable:
    return read_external(ExternalSource(path=path, family="structural", **options))


def _by(table: ExternalTable) -> dict[tuple[str, str], Any]:
    return {(r.prompt_id, r.variant_id): r for r in table.rows}


def _sample_records() -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = json.loads(SAMPLE.read_text(encoding="utf-8"))
    return records


def _write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    """The records as JSONL: a test of another defect than the .json file type reads this."""
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.fixture
def lines(tmp_path: Path) -> Path:
    return _write_jsonl(tmp_path / "sample.jsonl", _sample_records())


def test_the_published_json_array_is_a_file_type_it_reads() -> None:
    table = read_external(ExternalSource(path=SAMPLE, family="structural"))  # detected
    assert table.format == "dove"
    assert len(table.rows) == 6
    assert _by(table)[("31", "base")].response_text == " 2. conjunction"


def test_struct_list_and_int_dimensions_give_readable_variant_ids(lines: Path) -> None:
    table = _read(lines)
    rows = _by(table)
    assert len(table.rows) == 6
    assert rows[("31", "base")].response_text == " 2. conjunction"
    assert rows[("11", "base")].response_text == " 2. Jupiter"
    assert {v for _, v in rows if v != "base"} == VARIANT_IDS
    two = rows[("31", f"dove:instruction_phrasing={TOPIC}|separator=\\n")].variant
    assert two is not None
    assert (two.family, two.subtype, two.strength, two.position) == (
        "structural",
        "instruction_phrasing+separator",
        2.0,
        "global",
    )
    assert rows[("31", "base")].references == ("conjunction",)
    assert rows[("11", "base")].references == ("Jupiter",)
    assert {r.dataset for r in table.rows} == {"mmlu.formal_logic", "mmlu.astronomy"}
    assert {r.model for r in table.rows} == {"allenai/OLMo-2-1124-7B-Instruct"}
    assert rows[("31", "base")].prompt_text.startswith(
        "Here are multiple choice questions about formal logic.\n\nQuestion: Which connective"
    )
    assert "Choices: 1. disjunction; 2. conjunction; 3. implication" in (
        rows[("31", "base")].prompt_text
    )


def test_token_ids_come_from_generated_tokens_logprobs_where_they_spell_the_response(
    lines: Path,
) -> None:
    table = _read(lines)
    rows = _by(table)
    assert rows[("31", "base")].response_token_ids == (220, 13, 7136)
    assert rows[("11", "dove:enumerator=capitals")].response_token_ids == (426, 13, 7711)
    # " 2" and " 2." both continue " 2. Jupiter": no way to tell, the model tokenises it
    assert rows[("11", "base")].response_token_ids is None
    assert table.notes == {TOKENS_FROM_LOGPROBS: 5, CUMULATIVE_LOGPROB: 6}


def test_token_ids_from_logprobs_by_hand() -> None:
    def step(*pairs: tuple[int, str]) -> list[dict[str, Any]]:
        return [{"token_id": t, "logprob": -1.0, "rank": 1, "decoded_token": d} for t, d in pairs]

    assert token_ids_from_logprobs([step((5, "Hi"), (6, "Yo")), step((7, "!"))], "Hi!") == [5, 7]
    assert token_ids_from_logprobs([None, step((5, "Hi"))], "Hi") == [5]  # a null placeholder
    assert token_ids_from_logprobs([step((5, "Hi"))], "Hi!") is None  # falls short
    assert token_ids_from_logprobs([step((5, "H"), (6, "Hi"))], "Hi") is None  # ambiguous
    assert token_ids_from_logprobs([], "Hi") is None


def test_csv_with_nested_fields_as_json_text_reads_as_the_json() -> None:
    from_csv = _read(DOVE / "sample.csv")
    from_json = _read(SAMPLE)  # the .json array the CSV was written from
    assert from_csv.format == "dove"

    def key(t: ExternalTable) -> list[tuple[Any, ...]]:
        return [
            (r.prompt_id, r.variant_id, r.prompt_text, r.response_text, r.response_token_ids)
            for r in t.rows
        ]

    assert key(from_csv) == key(from_json)


def test_csv_nested_field_that_is_no_json_names_row_and_column(tmp_path: Path) -> None:
    with (DOVE / "sample.csv").open(encoding="utf-8", newline="") as handle:
        records = list(csv.DictReader(handle))
    records[1]["output"] = "{not json"
    bad = tmp_path / "bad.csv"
    with bad.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(records[0]))
        writer.writeheader()
        writer.writerows(records)
    with pytest.raises(InputError, match="struct") as caught:
        _read(bad, format="dove")
    assert (caught.value.row, caught.value.column) == (2, "output")


def _lite_parquet(tmp_path: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    with (DOVE / "lite.csv").open(encoding="utf-8", newline="") as handle:
        records: list[dict[str, Any]] = list(csv.DictReader(handle))
    for r in records:
        r["sample_index"] = int(r["sample_index"])
        r["dimensions_5: shots"] = int(r["dimensions_5: shots"])
        r["cumulative_logprob"] = float(r["cumulative_logprob"])
        r["score"] = float(r["score"])
    path = tmp_path / "lite.parquet"
    pq.write_table(pa.Table.from_pylist(records), path)
    return path


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_the_flat_dove_lite_layout_is_recognised(tmp_path: Path, kind: str) -> None:
    path = DOVE / "lite.csv" if kind == "csv" else _lite_parquet(tmp_path)
    table = _read(path)  # detected from its columns
    assert table.format == "dove"
    rows = _by(table)
    assert len(table.rows) == 6
    assert rows[("31", "base")].response_text == " 2. conjunction"
    assert rows[("11", "base")].references == ("2. Jupiter",)  # Lite's ground_truth column
    ids = {v for _, v in rows if v != "base"}
    assert "dove:enumerator=capitals" in ids
    (other,) = ids - {"dove:enumerator=capitals"}
    # the template text is long: its start names it
    assert other.startswith("dove:instruction_phrasing_text=The following are multiple choice")
    assert other.endswith("...|separator=\\n")
    assert all(r.response_token_ids is None for r in table.rows)
    assert table.notes == {CUMULATIVE_LOGPROB: 6}


def test_base_where_selects_struct_values_by_name_and_by_field(lines: Path) -> None:
    for where in ((("instruction_phrasing", TOPIC),), (("instruction_phrasing.name", TOPIC),)):
        rows = _by(_read(lines, base_where=where))
        assert rows[("31", "base")].response_text == " 1. disjunction"
        assert rows[("11", "base")].response_text == " 3. Venus"
        assert ("31", f"dove:instruction_phrasing={STATE}|separator=;") in rows


def test_base_where_keeps_the_separators_spaces(lines: Path) -> None:
    where = parse_base_where("separator=; ,enumerator=capitals")
    assert where == (("separator", "; "), ("enumerator", "capitals"))
    assert parse_base_where("separator=, ") == (("separator", ", "),)
    assert parse_base_where("separator=\\n,shots=0") == (("separator", "\\n"), ("shots", "0"))
    rows = _by(_read(lines, base_where=where))
    assert rows[("31", "base")].response_text == " B. conjunction"
    newline = _by(_read(lines, base_where=(("separator", "\\n"),)))
    assert newline[("11", "base")].response_text == " 3. Venus"


def test_base_where_on_the_command_line(tmp_path: Path) -> None:
    from sago_cli.score import score_inputs

    args = argparse.Namespace(
        generations=SAMPLE,
        model=None,
        format="dove",
        columns=None,
        family="structural",
        subtype=None,
        base_where="separator=; ,enumerator=capitals",
        config=None,
        preset=None,
        runs_dir=str(tmp_path),
        run_id=None,
        prefect_home=None,
    )
    _, source = score_inputs(args)
    assert source.base_where == (("separator", "; "), ("enumerator", "capitals"))


def test_base_where_an_int_or_list_and_its_errors(lines: Path) -> None:
    with pytest.raises(InputError, match="has 3 rows with the base configuration"):
        _read(lines, base_where=(("shots", "0"),))
    with pytest.raises(InputError, match="has 3 rows"):
        _read(lines, base_where=(("demonstrations", "none"),))
    with pytest.raises(InputError, match="did you mean 'enumerator'"):
        _read(lines, base_where=(("enumeratr", "numbers"),))


def test_demonstrations_that_differ_per_instance_leave_each_its_base() -> None:
    table = _read(DOVE / "demonstrations.jsonl")
    rows = _by(table)
    assert len(table.rows) == 6
    assert rows[("31", "base")].response_text == " 2. conjunction"
    assert rows[("11", "base")].response_text == " 2. Jupiter"
    assert {v for _, v in rows if v != "base"} == VARIANT_IDS


def test_a_group_with_a_base_and_no_variant_is_refused_naming_its_rows(tmp_path: Path) -> None:
    records = _sample_records()
    kept = records[:3] + records[3:4]  # the astronomy sample without its variants: row 4
    with pytest.raises(InputError, match=r"base and no variant.*rows 4\)") as caught:
        _read(_write_jsonl(tmp_path / "alone.jsonl", kept))
    assert caught.value.row == 4 and "\n" not in str(caught.value)
    with pytest.raises(InputError, match=r"base and no variant.*rows 1\)"):  # one record alone
        _read(_write_jsonl(tmp_path / "one.jsonl", records[:1]))


def test_an_empty_response_is_an_empty_answer_and_a_bad_logprob_an_error(
    tmp_path: Path,
) -> None:
    records = _sample_records()
    records[1]["output"] = {"response": ""}
    rows = _by(_read(_write_jsonl(tmp_path / "empty.jsonl", records)))
    empty = rows[("31", "dove:enumerator=capitals")]
    assert (empty.response_text, empty.failure_reason) == ("", None)
    records[2]["output"]["cumulative_logprob"] = "high"
    with pytest.raises(InputError, match="not a number") as caught:
        _read(_write_jsonl(tmp_path / "bad.jsonl", records))
    assert (caught.value.row, caught.value.column) == (3, "output.cumulative_logprob")


def test_without_family_dove_names_family_and_subtype_by_its_dimensions(tmp_path: Path) -> None:
    """The published files score with no flags; sample.json (0 shots) joined with
    demonstrations.jsonl (the same samples at 2 shots) gives both families."""
    table = read_external(ExternalSource(path=SAMPLE))
    variants = {r.variant_id: r.variant for r in table.rows if not r.is_base}
    assert variants["dove:enumerator=capitals"] == VariantKey(
        "template", "enumerator", 1.0, "global"
    )
    two = variants[f"dove:instruction_phrasing={TOPIC}|separator=\\n"]
    assert two == VariantKey("template", "instruction_phrasing+separator", 2.0, "global")
    demos = [json.loads(line) for line in (DOVE / "demonstrations.jsonl").open(encoding="utf-8")]
    joined = _write_jsonl(tmp_path / "shots.jsonl", _sample_records() + demos)
    rows = _by(read_external(ExternalSource(path=joined)))
    base = rows[("31", "base")]
    assert base.response_text == " 2. conjunction" and "Question:" in base.prompt_text
    shots = [
        r
        for (pid, _), r in rows.items()
        if pid == "31" and r.variant and r.variant.family == "fewshot"
    ]
    assert len(shots) == 1  # numbers, StateHere, "; " at 2 shots: only the demonstrations differ
    assert shots[0].variant == VariantKey("fewshot", "shots", 2.0, "prefix")
    assert shots[0].response_text == " 2. conjunction"
    overridden = read_external(ExternalSource(path=SAMPLE, family="structural", subtype="format"))
    assert {r.variant.family for r in overridden.rows if r.variant} == {"structural"}
    assert {r.variant.subtype for r in overridden.rows if r.variant} == {"format"}
