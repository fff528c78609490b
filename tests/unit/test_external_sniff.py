"""`sago score` says what a file is: zip (inspect_ai's .eval), Parquet, JSON, JSON
Lines or CSV told apart by content, never by name; a --format the file does not fit is
refused in one line naming the format that reads it, and without --format that format is
picked. The fixtures are files in the tools' real layouts (see test_lmeval.py,
test_inspect_log.py, test_dove.py)."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from sago_core.errors import InputError
from sago_core.external.options import ExternalSource, FormatName
from sago_core.external.read import read_external

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "external"
ARCHIVE = FIXTURES / "inspect" / "capitals_templates.eval"
RUNS = FIXTURES / "lmeval" / "capitals_plain_0shot_2shot.jsonl"
GENERATE = FIXTURES / "lmeval" / "generate.jsonl"
DOVE = FIXTURES / "dove" / "sample.json"


def _source(path: Path, fmt: FormatName | None = None) -> ExternalSource:
    return ExternalSource(path=path, format=fmt, family="structural")


@pytest.mark.parametrize(
    ("path", "wrong", "said"),
    [
        (ARCHIVE, "lm-eval", "this is an inspect_ai .eval log: use --format inspect"),
        (RUNS, "dove", "this is an lm-evaluation-harness samples log: use --format lm-eval"),
        (DOVE, "inspect", "this is a DOVE file: use --format dove"),
    ],
)
def test_a_wrong_format_is_refused_naming_the_right_one(
    path: Path, wrong: FormatName, said: str
) -> None:
    with pytest.raises(InputError, match=said) as caught:
        read_external(_source(path, wrong))
    assert "\n" not in str(caught.value) and caught.value.row is None


def test_without_format_the_content_picks_it() -> None:
    assert read_external(_source(ARCHIVE)).format == "inspect"
    assert read_external(_source(GENERATE)).format == "lm-eval"
    assert read_external(_source(DOVE)).format == "dove"


def test_the_name_does_not_decide_the_kind(tmp_path: Path) -> None:
    renamed = {
        "log.zip": ARCHIVE,  # an .eval archive under another name
        "samples.json": RUNS,  # JSON Lines called .json
        "dove.csv": DOVE,  # a JSON array called .csv
        "samples.txt": RUNS,
    }
    for name, original in renamed.items():
        copy = shutil.copy(original, tmp_path / name)
        expected = read_external(_source(original))
        table = read_external(_source(Path(copy)))
        assert (table.format, len(table.rows)) == (expected.format, len(expected.rows)), name


def test_parquet_is_told_by_its_magic(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    records = json.loads(DOVE.read_text(encoding="utf-8"))
    path = tmp_path / "dove.bin"
    pq.write_table(pa.Table.from_pylist(records), path)
    assert read_external(_source(path)).format == "dove"


def test_a_compressed_or_binary_file_is_named_for_what_it_is(tmp_path: Path) -> None:
    packed = tmp_path / "samples.jsonl.gz"
    packed.write_bytes(gzip.compress(RUNS.read_bytes()))
    with pytest.raises(InputError, match="gzip-compressed: decompress it first"):
        read_external(_source(packed))
    binary = tmp_path / "blob.jsonl"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(InputError, match=r"is no zip, Parquet, JSON, JSON Lines or CSV file"):
        read_external(_source(binary))


def test_the_command_line_says_it_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from sago_cli.main import main

    code = main(["score", str(ARCHIVE), "--format", "lm-eval"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.endswith(
        "this is an inspect_ai .eval log: use --format inspect (or leave --format out)"
    )
    assert len(err.splitlines()) == 1
