"""`sago export --format hf-dataset`: a run's instances as a Hugging Face dataset folder
(data/*.parquet + README.md with YAML front matter). `datasets` is not installed in this
environment, so the folder is checked the way the Hub's `parquet` builder reads it: the
front matter's `configs` parse with yaml, its `data_files` glob matches exactly the files
written, and each file reads with pyarrow (what `datasets` reads Parquet with) and polars.
The run here is written by hand; expected values are read off it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq
import pytest
import yaml

from sago_cli.main import main
from sago_core.artifacts.schemas import SUMMARY, instances_schema
from sago_core.artifacts.store import write_parquet
from sago_core.errors import ConfigError, InputError
from sago_core.external.hf_dataset import export_hf_dataset

AXES = ("act", "bleu", "bert", "prob", "ent", "mr")
NO_MODEL = "external generations: no model given"


def _instance(variant_id: str, family: str, strength: float, answer: str, bleu: float) -> dict:
    row: dict[str, Any] = {
        "model": "hf:smollm2-135m",
        "dataset": "builtin_truthfulqa",
        "prompt_id": "q1",
        "variant_id": variant_id,
        "family": family,
        "subtype": "spacing" if family == "noise" else "politeness",
        "strength": strength,
        "position": "global",
        "base_prompt": "Why is the sky blue?",
        "variant_prompt": "Why  is the sky  blue?",
        "base_answer": "Rayleigh scattering.",
        "variant_answer": answer,
        "mr_intensity": None,
        "mr_intensity_reason": "no detector for this subtype",
        "base_correct": True,
        "variant_correct": None,
        "correct_missing_reason": "no answer",
    }
    for axis in AXES:
        row[f"d_{axis}"] = bleu if axis == "bleu" else None
        row[f"reason_{axis}"] = None if axis == "bleu" else NO_MODEL
    return row


INSTANCES = [
    _instance("noise:spacing:5:global", "noise", 5.0, "Rayleigh.", 0.25),
    _instance("register:-2:suffix", "register", -2.0, "Scattering of light.", 0.5),
]


def _summary_row(dataset: str, axis: str, sgs: float | None, reason: str | None) -> dict:
    row: dict[str, Any] = {c: None for c in SUMMARY}
    row.update(model="hf:smollm2-135m", dataset=dataset, axis=axis, sgs=sgs, n=1)
    row.update(missing_reason=reason, ci_low=0.125 if sgs else None, ci_high=0.625 if sgs else None)
    row.update(p_holm=0.03125 if sgs else None)
    return row


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "runs" / "demo-abc"
    write_parquet(
        pl.DataFrame(INSTANCES, schema=instances_schema()),
        folder / "instances.parquet",
        instances_schema(),
    )
    summary = [
        _summary_row("__pooled__", "bleu", 0.3953, None),
        _summary_row("__pooled__", "act", None, NO_MODEL),
        _summary_row("builtin_truthfulqa", "bleu", 0.3953, None),
    ]
    write_parquet(pl.DataFrame(summary, schema=SUMMARY), folder / "summary.parquet", SUMMARY)
    manifest = {"run_id": "demo-abc", "config": {"preset": "demo"}, "packages": {"sago": "0.1.0"}}
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return folder


def _card(out: Path) -> tuple[dict[str, Any], str]:
    text = (out / "README.md").read_text(encoding="utf-8")
    assert text.startswith("---\n")
    head, _, body = text[4:].partition("\n---\n")
    return yaml.safe_load(head), body


def test_folder_loads_as_the_hub_reads_it(run_dir: Path, tmp_path: Path) -> None:
    out = export_hf_dataset(run_dir, tmp_path / "stability")
    meta, _ = _card(out)
    assert meta["configs"] == [
        {"config_name": "default", "data_files": [{"split": "train", "path": "data/*.parquet"}]}
    ]
    assert meta["license"] == "unknown"
    assert "sago" in meta["tags"] and meta["task_categories"] == ["text-generation"]
    assert meta["size_categories"] == ["n<1K"]
    matched = sorted(out.glob(meta["configs"][0]["data_files"][0]["path"]))
    written = sorted(p for p in out.rglob("*.parquet"))
    assert matched == written and len(written) == 1
    table = pq.read_table(matched[0])
    assert table.num_rows == 2
    assert table.column("variant_id").to_pylist() == [r["variant_id"] for r in INSTANCES]
    frame = pl.read_parquet(matched[0])
    assert frame["d_bleu"].to_list() == [0.25, 0.5]
    assert frame["d_act"].to_list() == [None, None]  # missing stays null, with its reason
    assert frame["reason_act"].to_list() == [NO_MODEL, NO_MODEL]
    assert frame["variant_correct"].to_list() == [None, None]


def test_card_body_states_what_was_measured(run_dir: Path, tmp_path: Path) -> None:
    _, body = _card(export_hf_dataset(run_dir, tmp_path / "stability", "cc-by-4.0"))
    assert "# sago prompt-stability results: demo-abc" in body
    assert "- models: `hf:smollm2-135m`" in body
    assert "- datasets: `builtin_truthfulqa`" in body
    assert "- variant families: `noise`, `register`" in body
    assert "- axes: `act`, `bleu`, `bert`, `prob`, `ent`, `mr`" in body
    assert "| hf:smollm2-135m | bleu | 0.3953 | [0.1250, 0.6250] | 1 | 0.0312 |  |" in body
    assert f"| hf:smollm2-135m | act | NA | NA | 1 | NA | {NO_MODEL} |" in body
    assert "arXiv 2610.01428" in body and "sago 0.1.0, run `demo-abc`" in body
    assert "builtin_truthfulqa | bleu" not in body  # only the pooled rows


def test_cli_writes_the_folder_with_the_license(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "stability"
    code = main(
        ["export", str(run_dir), "--format", "hf-dataset", "--out", str(out), "--license", "mit"]
    )
    assert code == 0
    meta, _ = _card(out)
    assert meta["license"] == "mit"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--format", "hf-dataset", "--out", "ds.parquet"], "writes a folder"),
        (["--out", "stability"], "must end in .csv or .jsonl or .parquet"),
        (["--out", "gen.csv", "--license", "mit"], "unrecognized arguments: --license mit"),
        (["--format", "hf-dataset", "--out", "ds.txt"], "name a folder (no suffix)"),
    ],
)
def test_an_out_that_contradicts_the_format_is_refused(
    argv: list[str],
    message: str,
    run_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    try:
        code = main(["export", str(run_dir), *argv])
    except SystemExit as exc:  # argparse refuses the argument itself
        code = exc.code  # type: ignore[assignment]
    assert code == 2
    assert message in capsys.readouterr().err
    assert list(work.iterdir()) == []


def test_a_non_empty_folder_is_not_overwritten(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "stability"
    out.mkdir()
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(ConfigError, match="not an empty folder"):
        export_hf_dataset(run_dir, out)
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


def test_a_run_without_instances_is_refused(run_dir: Path, tmp_path: Path) -> None:
    (run_dir / "instances.parquet").unlink()
    with pytest.raises(InputError, match=r"no instances\.parquet"):
        export_hf_dataset(run_dir, tmp_path / "stability")
