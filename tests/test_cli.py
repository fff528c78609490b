"""Command line: documented options, and bad input stopped before any model is loaded."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sago_cli.main import build_parser, main
from sago_core.backends.factory import loaded_engines

OPTIONS = [
    "--config",
    "--preset",
    "--models",
    "--datasets",
    "--data-dir",
    "--n",
    "--max-new-tokens",
    "--seed",
    "--runs-dir",
    "--run-id",
]


def test_help_documents_every_option() -> None:
    run_help = build_parser()._subparsers._group_actions[0].choices["run"].format_help()
    for option in OPTIONS:
        assert option in run_help
    top = subprocess.run(
        [sys.executable, "-m", "sago_cli", "--help"], capture_output=True, text=True, check=True
    )
    assert "run" in top.stdout


def _fails(argv: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> str:
    before = loaded_engines()
    code = main(["run", "--runs-dir", str(tmp_path / "runs"), *argv])
    assert code == 2
    assert loaded_engines() == before, "no model was loaded"
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").glob("demo-*"))
    return capsys.readouterr().err


def test_unknown_dataset(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert "unknown dataset 'trivia_qa'" in _fails(["--datasets", "trivia_qa"], capsys, tmp_path)


def test_prompt_file_with_missing_column(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "mine.csv"
    bad.write_text("prompt\nWhat is 2+2?\n", encoding="utf-8")
    err = _fails(["--datasets", str(bad)], capsys, tmp_path)
    assert str(bad) in err and "column 'question'" in err


def test_empty_prompt(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "mine.jsonl"
    bad.write_text('{"question": "fine?"}\n{"question": ""}\n', encoding="utf-8")
    err = _fails(["--datasets", str(bad)], capsys, tmp_path)
    assert "row 2" in err and "is empty" in err


def test_model_path_that_does_not_exist(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    err = _fails(["--models", f"hf:{tmp_path / 'no-such-model'}"], capsys, tmp_path)
    assert "does not exist" in err and "no-such-model" in err


def test_bad_spec_and_config_values(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert "BACKEND:ID" in _fails(["--models", "smollm2-135m"], capsys, tmp_path)
    assert "max_new_tokens" in _fails(["--max-new-tokens", "0"], capsys, tmp_path)
    config = tmp_path / "c.yaml"
    config.write_text("n: 2\nmodle: x\n")
    assert "modle" in _fails(["--config", str(config)], capsys, tmp_path)


def test_bad_input_loses_nothing_already_computed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    finished = tmp_path / "runs" / "demo-finished"
    finished.mkdir(parents=True)
    (finished / "summary.parquet").write_bytes(b"already computed")
    code = main(["run", "--runs-dir", str(tmp_path / "runs"), "--datasets", "nope"])
    assert code == 2
    assert (finished / "summary.parquet").read_bytes() == b"already computed"


def test_model_folders_never_collide() -> None:
    from sago_core.artifacts.layout import model_slug

    assert model_slug("hf:org/model") != model_slug("hf:org_model")
    assert model_slug("hf:smollm2-135m").startswith("hf_smollm2-135m-")


def test_consistency_dry_run_prints_the_design_check_and_builds_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, shared_data: Path
) -> None:
    """The earlier example study (7 checkpoints, Alpaca among 5 OOD sets): its plan says
    significance is unreachable and that Alpaca has no gold answers, before anything runs."""
    import yaml

    example = Path(__file__).parents[1] / "examples" / "consistency.yaml"
    study = yaml.safe_load(example.read_text())
    study["make_series"]["folder"] = str(tmp_path / "series")
    study["make_series"]["finetune_steps"] = list(range(7))
    study["make_series"]["quantize_bits"] = [32, 16, 8, 6, 5, 4, 3]
    study["out_of_distribution"] = [*study["out_of_distribution"], "alpaca"]
    study["evaluation"]["datasets"] = [*study["evaluation"]["datasets"], "alpaca"]
    study["evaluation"]["runs_dir"] = str(tmp_path / "runs")
    study["evaluation"]["data_dir"] = str(shared_data)
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    assert main(["consistency", "--config", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Design check:") and "unreachable" in out.split("\n")[0].lower()
    assert "smallest p 0.0417" in out and "10 OOD pairs" in out
    assert "alpaca: no reference answers" in out
    assert not (tmp_path / "series").exists() and not (tmp_path / "runs").exists()
