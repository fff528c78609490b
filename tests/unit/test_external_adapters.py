"""The public-format readers on this project's own sample files: the SAGO reference code's
result CSVs and DOVE / PromptSuite records (JSONL here, and the same as Parquet)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from sago_core.errors import InputError
from sago_core.external.options import ExternalSource
from sago_core.external.read import read_external
from sago_core.external.reference import BASE_ANSWERS, SEVERAL_BASES
from sago_core.external.schema import VariantKey
from sago_core.vocabulary import REPLAY_FAMILY

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "external"
REFERENCE = FIXTURES / "politeness" / "results.csv"
DOVE = FIXTURES / "dove.jsonl"


def test_reference_rows_become_pairs_with_their_own_base() -> None:
    table = read_external(ExternalSource(path=REFERENCE))
    assert table.format == "sago-reference"
    rows = {(r.prompt_id, r.variant_id): r for r in table.rows}
    # one prompt, one unit: prompt 0's two base answers are base samples of it,
    # the first its base row, every other base answer (one per row) a replay of it
    assert table.notes == {SEVERAL_BASES: 1, BASE_ANSWERS: 6}
    assert sorted({r.prompt_id for r in table.rows}) == ["0", "1", "2"]
    assert rows[("0", "base")].response_text == (
        "Nothing happens; they pass through your digestive system."
    )
    assert rows[("0", "replay:base:4:global")].response_text == (
        "Watermelon seeds pass through your digestive system harmlessly."
    )
    assert ("0", "register:+4:suffix") in rows and ("0", "register:+2:prefix") in rows
    # strength 0 is the base asked again: base samples (replays), never a variant
    replays = [r for r in table.rows if r.variant is not None and r.variant.family == REPLAY_FAMILY]
    assert [r.prompt_id for r in replays] == ["0"] * 5 + ["1"] * 5 + ["2"] * 5
    assert all(r.variant is not None and r.variant.family == "replay" for r in replays)
    variant = rows[("1", "register:-4:suffix")].variant
    assert variant is not None
    assert (variant.family, variant.subtype, variant.strength, variant.position) == (
        "register",
        "politeness",
        -4.0,
        "suffix",
    )
    assert {r.dataset for r in table.rows} == {"truthfulqa"}  # the category column
    assert {r.model for r in table.rows} == {"llama-3.1-8b"}
    assert len(table.rows) == 3 + 15 + 12  # bases, their other base answers, variants


def test_reference_family_comes_from_the_option_outside_a_family_folder(tmp_path: Path) -> None:
    moved = shutil.copy(REFERENCE, tmp_path / "results.csv")
    with pytest.raises(InputError, match="give --family and --subtype"):
        read_external(ExternalSource(path=moved, format="sago-reference"))
    table = read_external(
        ExternalSource(path=moved, format="sago-reference", family="noise", subtype="spacing")
    )
    ids = {r.variant_id for r in table.rows}
    assert "noise:spacing:2:prefix" in ids and "noise:spacing:-4:suffix" in ids


def test_reference_unknown_place_names_row_and_column(tmp_path: Path) -> None:
    folder = tmp_path / "politeness"
    folder.mkdir()
    lines = REFERENCE.read_text(encoding="utf-8").splitlines()
    lines[3] = lines[3].replace(",prefix,", ",middle,", 1)
    bad = folder / "results.csv"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="unknown place 'middle'") as caught:
        read_external(ExternalSource(path=bad))
    assert (caught.value.row, caught.value.column) == (3, "place")


def _dove(path: Path, **options: object):  # type: ignore[no-untyped-def]
    return read_external(ExternalSource(path=path, family="structural", **options))  # type: ignore[arg-type]


def test_dove_groups_by_sample_and_picks_the_default_configuration_as_base() -> None:
    table = _dove(DOVE)
    assert table.format == "dove"
    bases = {(r.dataset, r.prompt_id): r for r in table.rows if r.is_base}
    # enumerator A, separator \n, no shuffle: each dimension's most frequent value
    assert bases[("mmlu.astronomy", "11")].response_text == "B. Jupiter"
    assert bases[("mmlu.biology", "4")].response_text == "B. Carbon dioxide"
    variants = {(r.prompt_id, r.variant_id): r for r in table.rows if not r.is_base}
    assert set(variants) == {
        ("11", "dove:enumerator=1"),
        ("11", "dove:separator=; |shuffle=True"),
        ("4", "dove:enumerator=1"),
        ("4", "dove:separator=; |shuffle=True"),
    }
    two = variants[("4", "dove:separator=; |shuffle=True")].variant
    assert two is not None and (two.family, two.subtype, two.strength) == (
        "structural",
        "separator+shuffle",
        2.0,
    )
    assert bases[("mmlu.biology", "4")].references == ("Carbon dioxide",)
    assert {r.model for r in table.rows} == {"olmo-2-7b"}
    assert bases[("mmlu.astronomy", "11")].prompt_text.startswith("Which planet is largest?\nA.")


def test_dove_base_where_picks_another_base_and_ambiguity_is_an_error() -> None:
    table = _dove(DOVE, base_where=(("enumerator", "1"),))
    base = next(r for r in table.rows if r.is_base and r.prompt_id == "4")
    assert base.response_text == "1. Oxygen"
    with pytest.raises(InputError, match=r"has 2 rows with the base configuration") as caught:
        _dove(DOVE, base_where=(("shuffle", "False"),))
    assert caught.value.column == "prompt_config.dimensions"
    # no --family: DOVE's own dimensions name family and subtype
    plain = {r.variant_id: r.variant for r in read_external(ExternalSource(path=DOVE)).rows}
    assert plain["dove:enumerator=1"] == VariantKey("template", "enumerator", 1.0, "global")


def test_dove_parquet_reads_as_the_jsonl(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    records = [json.loads(line) for line in DOVE.read_text(encoding="utf-8").splitlines()]
    parquet = tmp_path / "dove.parquet"
    pq.write_table(pa.Table.from_pylist(records), parquet)
    from_parquet = [(r.prompt_id, r.variant_id, r.response_text) for r in _dove(parquet).rows]
    from_jsonl = [(r.prompt_id, r.variant_id, r.response_text) for r in _dove(DOVE).rows]
    assert from_parquet == from_jsonl
