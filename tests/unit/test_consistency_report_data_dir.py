"""``sago consistency --data-dir``: the command line's data folder replaces the study file's
``evaluation.data_dir``, so examples/consistency.yaml names none (nothing a user reads
depends on ../shared) and still finds its datasets when given one."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sago_cli.main import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "consistency.yaml"
LAYOUT = "triviaqa: references from column(s) golden_answers (triviaqa layout)"


def test_the_example_names_no_data_folder_and_reads_the_one_given(
    capsys: pytest.CaptureFixture[str], shared_data: Path
) -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    assert "../shared" not in text and "data_dir" not in yaml.safe_load(text)["evaluation"]
    assert main(["consistency", "--config", str(EXAMPLE), "--dry-run"]) == 0
    assert "triviaqa reader's answer column(s) (no data_dir)" in capsys.readouterr().out
    given = ["--data-dir", str(shared_data)]
    assert main(["consistency", "--config", str(EXAMPLE), "--dry-run", *given]) == 0
    assert LAYOUT in capsys.readouterr().out


def test_the_command_line_data_dir_overrides_the_files(
    capsys: pytest.CaptureFixture[str], shared_data: Path, tmp_path: Path
) -> None:
    study = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    study["evaluation"]["data_dir"] = str(tmp_path / "nowhere")
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study), encoding="utf-8")
    given = ["--data-dir", str(shared_data)]
    assert main(["consistency", "--config", str(path), "--dry-run", *given]) == 0
    out = capsys.readouterr().out
    assert LAYOUT in out and "nowhere" not in out
