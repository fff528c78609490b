"""The input schema of `sago score`: strict validation, column mapping, format detection."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from sago_core.errors import ConfigError, InputError
from sago_core.external.columns import parse_mapping
from sago_core.external.options import ExternalSource
from sago_core.external.read import read_external
from sago_core.external.schema import EMPTY_RESPONSE

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "external"
HEADER = ["dataset", "prompt_id", "variant_id", "prompt_text", "response_text"]


def _write(path: Path, rows: list[list[str]], header: list[str] = HEADER) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def _read(path: Path, **options: object) -> list:
    return read_external(ExternalSource(path=path, **options)).rows  # type: ignore[arg-type]


def test_sample_file_reads_with_variants_from_their_ids() -> None:
    table = read_external(ExternalSource(path=FIXTURES / "generations.csv"))
    assert table.format == "generations"
    assert len(table.rows) == 18
    by_id = {(r.prompt_id, r.variant_id): r for r in table.rows}
    noise = by_id[("p1", "noise:spacing:5:global")].variant
    assert noise is not None
    assert (noise.family, noise.subtype, noise.strength, noise.position) == (
        "noise",
        "spacing",
        5.0,
        "global",
    )
    register = by_id[("p1", "register:-2:suffix")].variant
    assert register is not None and (register.subtype, register.strength) == ("politeness", -2.0)
    assert by_id[("p1", "base")].references == ("Paris",)  # a JSON array in the CSV
    assert by_id[("p2", "base")].references == ("Tokyo",)  # one plain string
    assert by_id[("p1", "noise:spacing:5:global")].prompt_text == "What  is the capital of  France?"


def test_empty_response_is_missing_with_its_reason_not_an_empty_answer() -> None:
    rows = _read(FIXTURES / "generations.csv")
    empty = next(r for r in rows if r.prompt_id == "p2" and r.variant_id == "register:-2:suffix")
    assert empty.response_text is None
    assert empty.failure_reason == EMPTY_RESPONSE


def test_failure_reason_column_says_which_empty_responses_are_answers(tmp_path: Path) -> None:
    header = [*HEADER, "failure_reason"]
    rows = [
        ["d", "1", "base", "Hi?", "Hello.", ""],
        ["d", "1", "noise:spacing:5:global", "Hi ?", "", ""],  # generated "": an answer
        ["d", "1", "noise:spacing:9:global", "Hi  ?", "", "timeout after 3 tries"],
        ["d", "1", "noise:punctuation:5:global", "Hi?!", "Hey", "server error"],
    ]
    got = {r.variant_id: r for r in _read(_write(tmp_path / "g.csv", rows, header))}
    answered = got["noise:spacing:5:global"]
    assert (answered.response_text, answered.failure_reason) == ("", None)
    failed = got["noise:spacing:9:global"]
    assert (failed.response_text, failed.failure_reason) == (None, "timeout after 3 tries")
    # a row the source marked failed stays failed, whatever text it holds
    marked = got["noise:punctuation:5:global"]
    assert (marked.response_text, marked.failure_reason) == (None, "server error")
    assert got["base"].response_text == "Hello."


def test_explicit_columns_for_ids_of_another_tool(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "g.csv",
        [
            ["d", "1", "base", "Hi?", "Hello.", "", "", "", ""],
            [
                "d",
                "1",
                "v-polite",
                "Hi, please?",
                "Hello!",
                "register",
                "politeness",
                "4",
                "prefix",
            ],
        ],
        [*HEADER, "family", "subtype", "strength", "position"],
    )
    rows = _read(path)
    variant = rows[1].variant
    assert variant is not None and (variant.family, variant.strength, variant.position) == (
        "register",
        4.0,
        "prefix",
    )
    assert rows[0].model == "external"


@pytest.mark.parametrize(
    ("rows", "row", "column", "words"),
    [
        ([["d", "1", "noise:spacing:5:global", "Hi  ?", "x"]], 1, "prompt_id", "no base row"),
        (
            [["d", "1", "base", "Hi?", "x"], ["d", "1", "base", "Hi?", "y"]],
            2,
            "variant_id",
            "two base rows",
        ),
        (
            [
                ["d", "1", "base", "Hi?", "x"],
                ["d", "1", "noise:spacing:5:global", "Hi  ?", "y"],
                ["d", "1", "noise:spacing:5:global", "Hi  ?", "z"],
            ],
            3,
            "variant_id",
            "duplicate row",
        ),
        ([["d", "1", "base", "Hi?", "x"], ["d", "1", "v7", "Hi!", "y"]], 2, "family", "required"),
        (
            [["d", "1", "base", "Hi?", "x"], ["d", "1", "colour:red:1:global", "Hi!", "y"]],
            2,
            "family",
            "",
        ),
        ([["d", "1", "base", "", "x"]], 1, "prompt_text", "is empty"),
        (
            [["d", "1", "base", "Hi?", "x"], ["d", "1", "noise:spacing:5:middle", "Hi  ?", "y"]],
            2,
            "position",
            "unknown position",
        ),
    ],
)
def test_bad_rows_name_file_row_and_column(
    tmp_path: Path, rows: list[list[str]], row: int, column: str, words: str
) -> None:
    path = _write(tmp_path / "bad.csv", rows)
    with pytest.raises(InputError) as caught:
        _read(path)
    assert caught.value.file == str(path)
    assert caught.value.row == row
    assert caught.value.column == column
    assert words in str(caught.value)


def test_unknown_family_column_is_an_error_with_the_known_ones(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "g.csv",
        [["d", "1", "base", "Hi?", "x", ""], ["d", "1", "v", "Hi!", "y", "colour"]],
        [*HEADER, "family"],
    )
    with pytest.raises(InputError, match=r"unknown family 'colour'.*register"):
        _read(path, format="generations")


def test_column_that_disagrees_with_the_id_is_an_error(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "g.csv",
        [
            ["d", "1", "base", "Hi?", "x", ""],
            ["d", "1", "noise:spacing:5:global", "Hi  ?", "y", "9"],
        ],
        [*HEADER, "strength"],
    )
    with pytest.raises(InputError, match="disagrees with the variant id") as caught:
        _read(path)
    assert (caught.value.row, caught.value.column) == (2, "strength")


def test_column_mapping_renames_and_names_a_missing_column(tmp_path: Path) -> None:
    header = ["dataset", "prompt_id", "variant_id", "question", "output"]
    path = _write(tmp_path / "m.csv", [["d", "1", "base", "Hi?", "Hello."]], header)
    mapping = parse_mapping("prompt_text=question,response_text=output")
    rows = _read(path, columns=mapping)
    assert (rows[0].prompt_text, rows[0].response_text) == ("Hi?", "Hello.")
    with pytest.raises(InputError, match="did you mean 'question'") as caught:
        _read(path, columns=parse_mapping("prompt_text=questoin,response_text=output"))
    assert caught.value.column == "questoin"
    with pytest.raises(ConfigError, match="not a column of the input schema"):
        _read(path, columns=parse_mapping("prompt=question"))


def test_mapping_syntax_errors() -> None:
    with pytest.raises(ConfigError, match="NAME=COLUMN"):
        parse_mapping("prompt_text")
    with pytest.raises(ConfigError, match="mapped twice"):
        parse_mapping("a=b,a=c")


def test_columns_that_match_no_format_are_an_error_listing_them(tmp_path: Path) -> None:
    path = _write(tmp_path / "x.csv", [["1", "2"]], ["foo", "bar"])
    with pytest.raises(InputError, match=r"columns \['bar', 'foo'\] match no known format"):
        _read(path)


def test_token_ids_are_read_from_a_json_array(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "t.csv",
        [["d", "1", "base", "Hi?", "Hello.", "[9, 8, 2]"]],
        [*HEADER, "response_token_ids"],
    )
    assert _read(path)[0].response_token_ids == (9, 8, 2)
    bad = _write(
        tmp_path / "b.csv",
        [["d", "1", "base", "Hi?", "Hello.", "[9, -1]"]],
        [*HEADER, "response_token_ids"],
    )
    with pytest.raises(InputError, match="not a token id"):
        _read(bad)


def test_a_prompt_file_in_json_lines_splits_on_newlines_only(tmp_path: Path) -> None:
    from sago_core.data.records import read_records

    path = tmp_path / "prompts.jsonl"
    path.write_text(
        '{"question": "Line\u2028separator\u0085next\u2029para"}\r\n{"question": "two"}\n',
        encoding="utf-8",
    )
    records = read_records(path)
    assert [r["question"] for r in records] == ["Line\u2028separator\u0085next\u2029para", "two"]


def test_a_file_in_the_input_schema_pairs_a_variant_with_a_base_sample_it_names(
    tmp_path: Path,
) -> None:
    """``paired_base``: the variant is compared with that base sample's answer (a replay of
    the base), not with the base row's; a name that is no base sample of the prompt is an
    error naming the row and the column."""
    import polars as pl

    from sago_core.external.frames import model_generations, rows_frame
    from sago_core.stages.pairs import score_pairs

    header = [*HEADER, "paired_base"]
    rows = [
        ["d", "1", "base", "Hi?", "Hello there.", ""],
        ["d", "1", "replay:base:1:global", "Hi?", "Good morning.", ""],
        ["d", "1", "noise:spacing:5:global", "Hi  ?", "Good morning.", "replay:base:1:global"],
        ["d", "1", "noise:spacing:9:global", "H i ?", "Good morning.", ""],
    ]
    path = _write(tmp_path / "g.csv", rows, header)
    table = read_external(ExternalSource(path=path))
    generations = model_generations(
        rows_frame(table.rows, path.name, "0" * 64), "external", None, None
    )
    pairs = score_pairs(
        generations, lambda h, r: [float(a == b) for a, b in zip(h, r, strict=True)]
    )
    bleu = dict(zip(pairs["variant_id"], pairs["bleu"], strict=True))
    assert bleu["noise:spacing:5:global"] == 100.0  # its own base answer, word for word
    assert bleu["noise:spacing:9:global"] < 100.0  # blank: the base row's answer
    assert pairs.filter(pl.col("variant_id") == "noise:spacing:5:global")["bert_f1"][0] == 1.0
    rows[2][5] = "replay:base:2:global"
    with pytest.raises(InputError, match="no base sample of prompt '1'") as caught:
        _read(_write(tmp_path / "bad.csv", rows, header))
    assert (caught.value.row, caught.value.column) == (3, "paired_base")
    rows[2][5], rows[0][5] = "", "base"
    with pytest.raises(InputError, match="compared with nothing") as caught:
        _read(_write(tmp_path / "bad.csv", rows, header))
    assert (caught.value.row, caught.value.column) == (1, "paired_base")
