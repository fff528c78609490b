"""`sago score` on inspect_ai eval logs (0.3.260's written form). The fixtures under
tests/fixtures/external/inspect/ are this project's own logs built from inspect_ai's
``EvalLog``/``EvalSample``/``ModelOutput`` field names: ``templates.json`` holds three logs
(one task per prompt template) of two samples each, with content parts, a system message,
log-probs, a second epoch and a failed sample; ``templates_in_metadata.json`` is one log whose
samples name their template and item in ``metadata``. The ``.eval`` archives are written here
in the layout of inspect's ``_recorders/eval.py`` (header.json + samples/<id>_epoch_<n>.json).
Further fixtures: ``two_models.json``, two tasks (templates) run on two models, the second
model's logs from an older inspect (no ``eval_id``) and its second task cancelled after one
sample; ``capitals_templates.eval``, an archive as ``_recorders/eval.py`` finishes it
(``_journal/``, ``samples/``, ``summaries.json``, ``reductions.json``, ``header.json``).
Expected values are read off the fixtures by hand."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from sago_cli.main import build_parser
from sago_cli.score import score_inputs
from sago_core.errors import InputError
from sago_core.external.inspect_log import LATER_EPOCHS, LOGPROBS
from sago_core.external.options import ExternalSource
from sago_core.external.read import ExternalTable, read_external

INSPECT = Path(__file__).resolve().parents[1] / "fixtures" / "external" / "inspect"
TEMPLATES = INSPECT / "templates.json"
IN_METADATA = INSPECT / "templates_in_metadata.json"
TWO_MODELS = INSPECT / "two_models.json"
ARCHIVE = INSPECT / "capitals_templates.eval"
GPT, HAIKU = "openai/gpt-4o-mini", "anthropic/claude-3-5-haiku-latest"


def _read(path: Path, **options: Any) -> ExternalTable:
    return read_external(ExternalSource(path=path, family="structural", **options))


def _by(table: ExternalTable) -> dict[tuple[str, str], Any]:
    return {(r.prompt_id, r.variant_id): r for r in table.rows}


def _logs() -> list[dict[str, Any]]:
    logs: list[dict[str, Any]] = json.loads(TEMPLATES.read_text(encoding="utf-8"))
    return logs


def _dump(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def _archive(path: Path, log: dict[str, Any], header: str = "header.json") -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(header, json.dumps({k: v for k, v in log.items() if k != "samples"}))
        for sample in log["samples"]:
            name = f"samples/{sample['id']}_epoch_{sample['epoch']}.json"
            archive.writestr(name, json.dumps(sample))
    return path


def test_three_templates_logs_become_base_and_variants() -> None:
    table = _read(TEMPLATES)
    assert table.format == "inspect"
    rows = _by(table)
    assert len(table.rows) == 6
    assert table.notes == {LATER_EPOCHS: 1, LOGPROBS: 2}
    base = rows[("1", "base")]
    assert (base.model, base.dataset) == ("openai/gpt-4o-mini", "capitals")
    assert base.prompt_text == "Question: What is the capital of France?\nAnswer:"
    assert base.response_text == "Paris"
    assert base.references == ("Paris",)
    polite = rows[("1", "inspect:capitals_polite")]
    # the system message is part of the prompt; text parts joined by a newline
    assert polite.prompt_text == (
        "You are a courteous assistant.\n\nCould you please tell me:\n"
        "What is the capital of France?"
    )
    assert polite.response_text == "Certainly! It is Paris."  # the reasoning part is no text
    assert rows[("2", "inspect:capitals_polite")].response_text == "Certainly! It is Tokyo."
    failed = rows[("2", "inspect:capitals_terse")]
    assert failed.response_text is None
    assert failed.failure_reason == "inspect sample error: RateLimitError: 429 Too Many Requests"
    variant = rows[("1", "inspect:capitals_terse")].variant
    assert variant is not None
    assert (variant.family, variant.subtype, variant.strength, variant.position) == (
        "structural",
        "template",
        1.0,
        "global",
    )


def test_base_where_names_the_base_template() -> None:
    rows = _by(_read(TEMPLATES, base_where=(("task", "capitals_terse"),), subtype="format"))
    assert rows[("1", "base")].response_text == "Paris."
    assert rows[("1", "inspect:capitals_plain")].response_text == "Paris"
    assert rows[("1", "inspect:capitals_plain")].variant.subtype == "format"
    with pytest.raises(InputError, match="not one of the logs'"):
        _read(TEMPLATES, base_where=(("task", "capitals_loud"),))


def test_templates_named_in_sample_metadata_of_one_log() -> None:
    table = _read(IN_METADATA)
    rows = _by(table)
    assert len(table.rows) == 6 and table.notes == {}
    base = rows[("planet", "base")]  # the first template met: letters
    assert base.dataset == "science_mc"
    assert base.response_text == "ANSWER: B"
    assert base.references == ("B", "Jupiter")  # the target letter and the choice it names
    assert rows[("planet", "inspect:inline")].response_text == "Jupiter"
    empty = rows[("gas", "inspect:inline")]  # generated "": an empty answer
    assert (empty.response_text, empty.failure_reason) == ("", None)


def test_eval_archive_reads_as_its_json_log(tmp_path: Path) -> None:
    log = json.loads(IN_METADATA.read_text(encoding="utf-8"))
    letters = (("template", "letters"),)  # the archive's samples come sorted by id
    from_zip = _read(_archive(tmp_path / "log.eval", log), base_where=letters)
    from_json = _read(IN_METADATA, base_where=letters)
    assert from_zip.format == "inspect"
    assert sorted(
        (r.prompt_id, r.variant_id, r.prompt_text, r.response_text) for r in from_zip.rows
    ) == sorted((r.prompt_id, r.variant_id, r.prompt_text, r.response_text) for r in from_json.rows)
    # an unfinished log: no header.json, the journal's start.json
    started = _read(_archive(tmp_path / "started.eval", log, header="_journal/start.json"))
    assert len(started.rows) == 6


def test_eval_archive_member_written_twice_is_read_from_its_last(tmp_path: Path) -> None:
    log = json.loads(IN_METADATA.read_text(encoding="utf-8"))
    path = _archive(tmp_path / "log.eval", log)
    again = dict(log["samples"][2])  # planet-inline, re-logged with another answer
    again["output"] = {
        "model": "m",
        "choices": [{"message": {"role": "assistant", "content": "Mars"}}],
    }
    with zipfile.ZipFile(path, "a") as archive, pytest.warns(UserWarning, match="Duplicate"):
        archive.writestr("samples/planet-inline_epoch_1.json", json.dumps(again))
    rows = _by(_read(path, base_where=(("template", "letters"),)))
    assert rows[("planet", "inspect:inline")].response_text == "Mars"


def test_a_file_that_is_no_archive_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "log.eval"
    path.write_text("not a zip", encoding="utf-8")
    with pytest.raises(InputError, match="is not a zip archive"):
        _read(path)


def test_logs_one_per_line_in_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "logs.jsonl"
    path.write_text("".join(json.dumps(log) + "\n" for log in _logs()), encoding="utf-8")
    table = _read(path)
    assert table.format == "inspect" and len(table.rows) == 6


def test_one_template_alone_is_refused_naming_rows(tmp_path: Path) -> None:
    path = _dump(tmp_path / "plain.json", _logs()[0])  # the native form: one EvalLog object
    with pytest.raises(InputError, match=r"2 sample\(s\) have the base template and no other"):
        _read(path)


def test_family_is_required() -> None:
    with pytest.raises(InputError, match="give --family"):
        read_external(ExternalSource(path=TEMPLATES))


def test_a_positive_logprob_is_refused(tmp_path: Path) -> None:
    logs = _logs()
    logs[2]["samples"][0]["output"]["choices"][0]["logprobs"]["content"][0]["logprob"] = 0.5
    with pytest.raises(InputError, match="not a finite number <= 0") as info:
        _read(_dump(tmp_path / "logs.json", logs))
    assert "row 6" in str(info.value)  # the sixth sample of the file (terse log, sample 1)


def test_one_id_from_two_datasets_is_refused(tmp_path: Path) -> None:
    logs = _logs()
    logs[1]["eval"]["dataset"]["name"] = "other"
    with pytest.raises(InputError, match="comes from different datasets"):
        _read(_dump(tmp_path / "logs.json", logs))


def test_logs_of_one_task_are_told_apart_by_their_task_args(tmp_path: Path) -> None:
    logs = _logs()
    for log, style in zip(logs, ("plain", "polite", "terse"), strict=True):
        log["eval"]["task"] = "capitals"
        log["eval"]["task_args"] = {"style": style}
    rows = _by(_read(_dump(tmp_path / "logs.json", logs)))
    assert ("1", "inspect:capitals[style=terse]") in rows
    assert rows[("1", "base")].response_text == "Paris"


def test_attachment_text_is_resolved(tmp_path: Path) -> None:
    logs = _logs()
    sample = logs[0]["samples"][0]
    sample["messages"][0]["content"] = "attachment://abc123"
    sample["attachments"] = {"abc123": "Question: Which city is the capital of France?"}
    rows = _by(_read(_dump(tmp_path / "logs.json", logs)))
    assert rows[("1", "base")].prompt_text == "Question: Which city is the capital of France?"


def test_cli_format_inspect_is_a_format_of_its_own() -> None:
    args = build_parser().parse_args(
        ["score", "--generations", str(TEMPLATES), "--format", "inspect", "--family", "noise"]
    )
    _, source = score_inputs(args)
    assert source.format == "inspect"
    assert read_external(source).format == "inspect"


def test_logs_with_one_task_and_the_same_task_args_are_refused(tmp_path: Path) -> None:
    logs = _logs()
    for log in logs:
        log["eval"]["task"] = "capitals"
        log["eval"]["task_args"] = {}
    with pytest.raises(InputError, match=r"log 1 .*log 2 .*log 3 .*metadata\.template"):
        _read(_dump(tmp_path / "logs.json", logs))
    # the samples naming their templates tell the logs apart
    for log, name in zip(logs, ("plain", "polite", "terse"), strict=True):
        for sample in log["samples"]:
            sample["metadata"] = {**(sample.get("metadata") or {}), "template": name}
    rows = _by(_read(_dump(tmp_path / "named.json", logs)))
    assert ("1", "inspect:terse") in rows and rows[("1", "base")].response_text == "Paris"


def test_a_repeated_first_epoch_sample_is_an_error_not_a_later_epoch(tmp_path: Path) -> None:
    logs = _logs()
    first = next(s for s in logs[1]["samples"] if s.get("epoch", 1) == 1)
    logs[1]["samples"].append(json.loads(json.dumps(first)))
    with pytest.raises(InputError, match=rf"sample {first['id']!r} \(epoch 1\).*read twice"):
        _read(_dump(tmp_path / "logs.json", logs))


def test_logs_of_two_models_are_grouped_by_model_first() -> None:
    table = _read(TWO_MODELS)
    rows = {(r.model, r.prompt_id, r.variant_id): r for r in table.rows}
    assert set(rows) == {
        (GPT, "1", "base"),
        (GPT, "1", "inspect:capitals_terse"),
        (GPT, "2", "base"),
        (GPT, "2", "inspect:capitals_terse"),
        (HAIKU, "1", "base"),
        (HAIKU, "1", "inspect:capitals_terse"),
    }
    assert rows[(HAIKU, "1", "base")].response_text == "The capital of France is Paris."
    assert rows[(GPT, "1", "inspect:capitals_terse")].response_text == "Paris."
    warning = (
        "WARNING: inspect logs of an eval with status 'cancelled' (its samples read as they are)"
    )
    assert table.notes[warning] == 1
    from sago_core.external.inspect_log import INCOMPLETE

    assert table.notes[INCOMPLETE] == 1  # haiku's sample 2: its terse answer never came


def test_an_errored_eval_is_read_with_a_warning_naming_its_status(tmp_path: Path) -> None:
    logs = json.loads(TWO_MODELS.read_text(encoding="utf-8"))
    logs[3]["status"] = "error"
    logs[3]["error"] = {
        "message": "RateLimitError('429 Too Many Requests')",
        "traceback": "Traceback ...",
        "traceback_ansi": "Traceback ...",
    }
    notes = _read(_dump(tmp_path / "error.json", logs)).notes
    assert [n for n in notes if n.startswith("WARNING")] == [
        "WARNING: inspect logs of an eval with status 'error': RateLimitError('429 Too Many "
        "Requests') (its samples read as they are)"
    ]


def test_logs_without_an_eval_id_are_named_without_none(tmp_path: Path) -> None:
    logs = [
        log
        for log in json.loads(TWO_MODELS.read_text(encoding="utf-8"))
        if log["eval"]["model"] == HAIKU
    ]
    for log in logs:
        log["eval"]["task"] = "capitals"
    with pytest.raises(InputError, match=r"log 1 \(task_id 'capitals_plain-claude'") as caught:
        _read(_dump(tmp_path / "older.json", logs))
    assert "None" not in str(caught.value) and HAIKU in str(caught.value)
