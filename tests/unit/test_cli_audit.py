"""The instrument checks that used to be scripts under bench/: ``sago audit
bertscore-baseline`` writes the shipped table exactly as it is committed and a TSV in
bert-score's own layout; ``sago audit encoder`` refuses a sampled run in one line before any
encoder loads; no message sends a user to bench/."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from sago_cli.main import main
from sago_core.artifacts.layout import FINISHED_RUN_FILES, RUN_CONFIG
from sago_core.axes.bertscore_baseline import render_table, render_tsv, sentences
from sago_core.baselines import bertscore
from sago_core.baselines.bertscore_table import BASELINES

TABLE = Path(bertscore.__file__).with_name("bertscore_table.py")


def test_the_shipped_table_is_what_the_command_writes() -> None:
    rows = BASELINES["minilm-l6"]
    assert len(sentences()) == 119  # the corpus the table was computed on
    assert render_table("minilm-l6", rows, len(sentences())) == TABLE.read_text(encoding="utf-8")


def test_a_tsv_baseline_reads_as_bert_score_s_own_files() -> None:
    text = render_tsv({6: (0.25, 0.5, 0.375), 7: (0.1, 0.2, 0.15)})
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [(int(r["LAYER"]), float(r["F"])) for r in rows] == [(6, 0.375), (7, 0.15)]


def test_no_baseline_names_the_command_not_a_script() -> None:
    message = bertscore.no_baseline("my-encoder", 4)
    assert "sago audit bertscore-baseline --encoder" in message and "bench" not in message


def test_the_encoder_check_refuses_a_sampled_run_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in FINISHED_RUN_FILES:
        (tmp_path / name).touch()
    (tmp_path / RUN_CONFIG).write_text(json.dumps({"generation": {"samples": 4}}))
    assert main(["audit", "encoder", str(tmp_path), "--layer", "4"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "sampled at K = 4" in err
