"""Bad inputs: a typed error naming the file (and row and column where they exist), a
non-zero exit from the command line, nothing written, no model asked.

The model is a folder of garbage weights: loading it would crash with an untyped error, so
a clean typed error proves the input was refused before any model was touched."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sago_cli.main import main
from sago_core.data.loading import load_user_file
from sago_core.errors import InputError


@dataclass(frozen=True)
class Case:
    name: str
    make: Callable[[Path], list[str]]  # writes its files, returns the command-line arguments
    expect: tuple[str, ...]  # fragments of the error message


def _jsonl(rows: list[object]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def _data(tmp: Path, name: str, content: bytes) -> list[str]:
    path = tmp / name
    path.write_bytes(content)
    return ["--datasets", str(path)]


def _parquet(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def _config(tmp: Path, text: str) -> list[str]:
    path = tmp / "bad.yaml"
    path.write_text(text)
    return ["--config", str(path)]


GOOD = [{"question": "What is the capital of France?"}]
BIG_1MB = "word " * 210_000
BIG_10MB = "word " * 2_100_000

CASES = [
    Case(
        "empty prompt",
        lambda t: _data(t, "q.jsonl", _jsonl([*GOOD, {"question": ""}])),
        ("q.jsonl", "row 2", "'question'", "is empty"),
    ),
    Case(
        "whitespace prompt",
        lambda t: _data(t, "q.jsonl", _jsonl([{"question": " \t\n "}])),
        ("q.jsonl", "row 1", "'question'", "is empty"),
    ),
    Case(
        "missing column",
        lambda t: _data(t, "q.jsonl", _jsonl([{"questoin": "Why?"}])),
        ("q.jsonl", "row 1", "'question'", "missing column", "did you mean 'questoin'"),
    ),
    Case(
        "number for text",
        lambda t: _data(t, "q.jsonl", _jsonl([{"question": 42}])),
        ("q.jsonl", "row 1", "'question'", "must be text, got int"),
    ),
    Case(
        "null for text",
        lambda t: _data(t, "q.jsonl", _jsonl([*GOOD, {"question": None}])),
        ("q.jsonl", "row 2", "'question'", "must be text, got NoneType"),
    ),
    Case(
        "list for text",
        lambda t: _data(t, "q.jsonl", _jsonl([{"question": ["a", "b"]}])),
        ("q.jsonl", "row 1", "'question'", "must be text, got list"),
    ),
    Case(
        "duplicate ids",
        lambda t: _data(
            t, "q.jsonl", _jsonl([{"id": "a", "question": "Why?"}, {"id": "a", "question": "How?"}])
        ),
        ("q.jsonl", "row 2", "'prompt_id'", "duplicate prompt id 'a'"),
    ),
    Case("zero rows jsonl", lambda t: _data(t, "q.jsonl", b""), ("q.jsonl", "holds no rows")),
    Case("header-only csv", lambda t: _data(t, "q.csv", b"question\n"), ("q.csv", "holds no rows")),
    Case(
        "invalid utf-8",
        lambda t: _data(t, "q.jsonl", b'{"question": "caf\xe9?"}\n'),
        ("q.jsonl", "not valid UTF-8", "line 1"),
    ),
    Case(
        "lone surrogate",
        lambda t: _data(t, "q.jsonl", b'{"question": "Why \\ud800 so?"}\n'),
        ("q.jsonl", "row 1", "'question'", "lone surrogate"),
    ),
    Case(
        "NUL byte",
        lambda t: _data(t, "q.jsonl", b'{"question": "Why\\u0000 so?"}\n'),
        ("q.jsonl", "row 1", "'question'", "NUL byte"),
    ),
    Case(
        "1 MB prompt",
        lambda t: _data(t, "q.jsonl", _jsonl([*GOOD, {"question": BIG_1MB}])),
        ("q.jsonl", "row 2", "'question'", "characters long", "max_prompt_chars"),
    ),
    Case(
        "10 MB prompt",
        lambda t: _data(t, "q.jsonl", _jsonl([{"question": BIG_10MB}])),
        ("q.jsonl", "row 1", "'question'", "characters long"),
    ),
    Case(
        "template placeholder (strict)",
        lambda t: [
            *_data(t, "q.jsonl", _jsonl([{"question": "What is the capital of {country}?"}])),
            "--strict-placeholders",
        ],
        ("q.jsonl", "row 1", "'question'", "{country}", "allow_placeholders"),
    ),
    Case(
        "truncated parquet",
        lambda t: _data(t, "q.parquet", _parquet(pa.table({"question": ["Why?"] * 50}))[:-40]),
        ("q.parquet", "not a readable Parquet file"),
    ),
    Case(
        "not parquet",
        lambda t: _data(t, "q.parquet", b"question\nWhy?\n"),
        ("q.parquet", "not a readable Parquet file"),
    ),
    Case(
        "parquet wrong type",
        lambda t: _data(t, "q.parquet", _parquet(pa.table({"question": [1.5, 2.5]}))),
        ("q.parquet", "row 1", "must be text, got float"),
    ),
    Case(
        "parquet missing column",
        lambda t: _data(t, "q.parquet", _parquet(pa.table({"prompt": ["Why?"]}))),
        ("q.parquet", "row 1", "'question'", "missing column"),
    ),
    Case(
        "csv short row",
        lambda t: _data(t, "q.csv", b"id,question\n1,Why?\n2\n"),
        ("q.csv", "row 2", "'question'", "must be text, got NoneType"),
    ),
    Case(
        "jsonl bad line",
        lambda t: _data(t, "q.jsonl", _jsonl(GOOD) + b'{"question": "Wh\n'),
        ("q.jsonl", "row 2", "not valid JSON"),
    ),
    Case(
        "jsonl not object",
        lambda t: _data(t, "q.jsonl", _jsonl(GOOD) + b'["Why?"]\n'),
        ("q.jsonl", "row 2", "not a JSON object"),
    ),
    Case(
        "json not array",
        lambda t: _data(t, "q.json", b'{"question": "Why?"}'),
        ("q.json", "JSON array"),
    ),
    Case(
        "missing data file",
        lambda t: ["--datasets", str(t / "nowhere.csv")],
        ("nowhere.csv", "does not exist"),
    ),
    Case("unknown dataset", lambda t: ["--datasets", "imagenet"], ("unknown dataset 'imagenet'",)),
    Case(
        "unknown model path",
        lambda t: ["--models", f"hf:{t}/no-such-model"],
        ("no-such-model", "does not exist"),
    ),
    Case(
        "trust_remote_code for a stranger",
        lambda t: _config(t, "trust_remote_code: [hf:someone/else]\n"),
        ("bad.yaml", "trust_remote_code", "not in models"),
    ),
    Case("unknown backend", lambda t: ["--models", "onnx:model"], ("backend 'onnx'",)),
    Case(
        "api key unset",
        lambda t: [
            *_config(t, "api: {key_env: SAGO_UNSET_KEY_VAR}\n"),
            *("--models", "litellm:openai/x"),
        ],
        ("SAGO_UNSET_KEY_VAR",),
    ),
    Case("n is zero", lambda t: _config(t, "n: 0\n"), ("bad.yaml", "n:", "greater than")),
    Case(
        "negative max_new_tokens",
        lambda t: _config(t, "generation: {max_new_tokens: -1}\n"),
        ("bad.yaml", "generation.max_new_tokens"),
    ),
    Case(
        "unknown config key",
        lambda t: _config(t, "modles: [hf:x]\n"),
        ("bad.yaml", "modles: unknown key; did you mean 'models'?"),
    ),
    Case("wrong config type", lambda t: _config(t, "seed: abc\n"), ("bad.yaml", "seed")),
    Case(
        "odd register strength",
        lambda t: _config(t, "variants: {register: {strengths: [3]}}\n"),
        ("bad.yaml", "strength 3"),
    ),
    Case(
        "zero shard size",
        lambda t: _config(t, "orchestration: {shard_size: 0}\n"),
        ("bad.yaml", "orchestration.shard_size"),
    ),
    Case("malformed yaml", lambda t: _config(t, "models: [hf:x\n"), ("bad.yaml", "not valid YAML")),
]


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "garbage-model"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "llama"}')
    (folder / "model.safetensors").write_bytes(b"not weights")
    return folder


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_refused_before_anything_runs(
    case: Case, tmp_path: Path, model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    args = ["run", "--models", f"hf:{model_dir}", "--runs-dir", str(runs)]
    code = main([*args, *case.make(tmp_path)])
    message = capsys.readouterr().err
    assert code != 0
    assert message.startswith("sago: error: ") and "Traceback" not in message
    for fragment in case.expect:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    assert not runs.exists()  # no artifact, no Prefect home: nothing started


def test_there_are_at_least_25_cases() -> None:
    assert len(CASES) >= 25


def test_a_csv_with_a_byte_order_mark_is_read_correctly(tmp_path: Path) -> None:
    path = tmp_path / "bom.csv"
    path.write_bytes("\ufeffquestion\nWhy is the sky blue?\n".encode())
    (prompt,) = load_user_file(path)
    assert prompt.prompt == "Why is the sky blue?"


TEXT = st.text(alphabet=st.characters(codec=None, categories=None), max_size=200)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(values=st.lists(TEXT | st.integers() | st.none() | st.floats(), min_size=1, max_size=4))
def test_any_text_field_is_accepted_intact_or_refused_with_its_location(
    tmp_path: Path, values: list[object]
) -> None:
    """Whatever a question holds: accepted (stripped, valid UTF-8, no NUL) or InputError
    naming the file, the row and the column. Never another exception."""
    path = tmp_path / "prop.jsonl"
    path.write_text("".join(json.dumps({"question": v}) + "\n" for v in values))
    try:
        prompts = load_user_file(path)
    except InputError as exc:
        assert exc.file == str(path) and exc.row is not None and exc.column == "question"
        assert 1 <= exc.row <= len(values)
        return
    assert [p.prompt for p in prompts] == [str(v).strip() for v in values]
    for p in prompts:
        p.prompt.encode("utf-8")
        assert "\x00" not in p.prompt and p.prompt
