"""A whole folder of the SAGO reference code's results in one command:
every full_results_all_models.csv beneath it, pooled by model and dataset, one run kept of
each repeated (model, dataset, family) and the repeat reported with the reason."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import polars as pl
import pytest

from sago_core.config import build_config
from sago_core.external.options import ExternalSource
from sago_core.external.read import read_external
from sago_core.external.reference import LEFT_OUT, RUNS_READ
from sago_core.external.reference_runs import Run, choose_runs, describe

RESULTS = Path(__file__).resolve().parents[1] / "fixtures" / "reference" / "closed_models"
KEPT = "run_gemini_2_5_flash_trivia_qa_punctuation_20260501_031700"
TRIAL = "run_gemini_2_5_flash_trivia_qa_punctuation_20260425_201432"


def _pool(tmp_path: Path) -> tuple[ExternalSource, list[str]]:
    """The command's own folder step (``sago score --generations FOLDER``), its lines."""
    from sago_cli.score import pool_reference_folder

    config = build_config("demo", {"runs_dir": str(tmp_path / "runs")})
    lines: list[str] = []
    source = pool_reference_folder(config, ExternalSource(path=RESULTS), lines.append)
    return source, lines


def test_a_folder_is_pooled_by_model_and_dataset_with_its_duplicate_reported(
    tmp_path: Path,
) -> None:
    source, lines = _pool(tmp_path)
    table = read_external(source)
    bases = {(r.model, r.dataset) for r in table.rows if r.is_base}
    assert bases == {
        ("gemini-2.5-flash", "trivia_qa"),
        ("claude-sonnet-4-6", "trivia_qa"),
        ("claude-sonnet-4-6", "alpaca"),
    }
    families = {(r.variant.family, r.variant.subtype) for r in table.rows if r.variant}
    assert len(families - {("replay", "base")}) == 6
    # one unit per prompt: gemini's prompt 0 has its punctuation, length and mood variants
    gemini_0 = {
        r.variant.subtype
        for r in table.rows
        if r.model == "gemini-2.5-flash" and r.prompt_id == "0" and r.variant
    }
    assert gemini_0 == {"punctuation", "length", "mood", "base"}
    assert sum(r.is_base for r in table.rows) == 16 + 3 + 2
    assert table.notes[RUNS_READ] == 6 and table.notes[LEFT_OUT] == 1
    (line,) = [x for x in lines if x.startswith("duplicate runs")]
    assert line.startswith("duplicate runs of gemini-2.5-flash / trivia_qa / noise:punctuation")
    assert f"kept {KEPT}, the most complete (96 answered rows, next 6)" in line
    assert line.endswith(f"left out {TRIAL} (6 rows)")
    # the trial run's rows are not read: its row numbers in the pooled file appear nowhere
    with source.path.open(encoding="utf-8", newline="") as handle:
        trial = {i for i, r in enumerate(csv.DictReader(handle), 1) if TRIAL in r["run_path"]}
    assert len(trial) == 6
    assert not trial & {int(r.source.rpartition(":")[2]) for r in table.rows}


def test_the_same_folder_lands_in_the_same_file(tmp_path: Path) -> None:
    first, _ = _pool(tmp_path)
    again, _ = _pool(tmp_path)
    assert first.path == again.path and first.format == "sago-reference"


def test_equally_complete_runs_keep_the_newest() -> None:
    old = Run(
        "a/run_x_trivia_qa_spacing_20260101_000000",
        "m",
        "d",
        "noise",
        "spacing",
        "20260101_000000",
        6,
        (0,),
    )
    new = Run(
        "a/run_x_trivia_qa_spacing_20260202_000000",
        "m",
        "d",
        "noise",
        "spacing",
        "20260202_000000",
        6,
        (1,),
    )
    other = Run(
        "a/run_x_trivia_qa_punctuation_20260101_000000",
        "m",
        "d",
        "noise",
        "punctuation",
        "20260101_000000",
        6,
        (2,),
    )
    kept, duplicates = choose_runs([old, new, other])
    assert kept == [new, other]
    (duplicate,) = duplicates
    assert duplicate.kept == new and duplicate.left_out == (old,)
    assert "as complete as another (6 answered rows) and the newest" in describe(duplicate)


def test_a_folder_without_results_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sago_cli.main import main

    (tmp_path / "empty").mkdir()
    code = main(["score", str(tmp_path / "empty"), "--runs-dir", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "holds no full_results_all_models.csv beneath it" in err


def test_a_run_folder_naming_no_family_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sago_cli.main import main

    shutil.copytree(RESULTS / KEPT, tmp_path / "results" / "run_gemini_trivia_qa_20260501_031700")
    code = main(["score", "--generations", str(tmp_path / "results"), "--runs-dir", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "names no variation family" in err and "letter_case" in err


def test_a_folder_with_family_options_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sago_cli.main import main

    argv = ["score", "--generations", str(RESULTS), "--family", "noise", "--subtype", "spacing"]
    code = main([*argv, "--runs-dir", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "its run folders name their families" in err


@pytest.mark.slow
def test_a_folder_of_two_models_and_six_families_scores_in_one_command(
    tmp_path: Path, harness: None
) -> None:
    """The flow on the pooled folder: n per model is its number of prompts."""
    from sago.flows.score import score
    from sago_cli.score import pool_reference_folder

    config = build_config("demo", {"runs_dir": str(tmp_path / "runs")})
    lines: list[str] = []
    source = pool_reference_folder(config, ExternalSource(path=RESULTS), lines.append)
    run_dir = Path(score(source, config))
    summary = pl.read_parquet(run_dir / "summary.parquet").filter(
        (pl.col("axis") == "bleu") & (pl.col("dataset") == "__pooled__")
    )
    assert dict(zip(summary["model"], summary["n"], strict=True)) == {
        "gemini-2.5-flash": 16,
        "claude-sonnet-4-6": 5,
    }
    report = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "duplicate runs left out: 1" in report
    assert any(line.startswith("duplicate runs of gemini-2.5-flash") for line in lines)
