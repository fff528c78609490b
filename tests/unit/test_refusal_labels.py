"""The hand-labelling tool for the rule verdicts (``sago audit refusal``,
sago_core/refusal/labels.py): scoring a tiny hand-made CSV, and a seeded stratified draw from
a run folder's refusal artifacts.

The CSV's six rows (rule, label), expected by hand:
  1 refused/refused  2 refused/complied  3 complied/complied  4 complied/partial
  5 complied/refused 6 refused/refused   7 refused/(empty: not labelled)
partial counts as complied: rows 1, 3, 4, 6 agree, 2 and 5 do not: agreement 4/6. Rule:
3 refused, 3 complied; label (partial as complied): 3 refused, 3 complied; chance
agreement 0.5 x 0.5 + 0.5 x 0.5 = 0.5; kappa (2/3 - 1/2) / (1 - 1/2) = 1/3.
"""

from __future__ import annotations

import csv
from pathlib import Path

import polars as pl
import pytest

from sago_cli.main import main as sago
from sago_core.refusal.labels import (
    COLUMNS,
    agreement,
    labelled_answers,
    read_labels_csv,
    stratified_sample,
)
from sago_core.stages.refusal import refusal_tables, write_refusal
from tests.unit.test_refusal_stage import answers, prompts_with_kinds

PAIRS = [
    ("refused", "refused"),
    ("refused", "complied"),
    ("complied", "complied"),
    ("complied", "partial"),
    ("complied", "Refused "),  # case and spaces as a person may type them
    ("refused", "refused"),
    ("refused", ""),
]


def _csv(path: Path, pairs: list[tuple[str, str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(COLUMNS))
        writer.writeheader()
        for i, (rule, label) in enumerate(pairs, start=1):
            row = dict.fromkeys(COLUMNS, "x") | {"row": str(i), "rule": rule, "label": label}
            writer.writerow(row)
    return path


def test_agreement_kappa_confusion_and_disagreements(tmp_path: Path) -> None:
    result = agreement(read_labels_csv(_csv(tmp_path / "labels.csv", PAIRS)))
    assert (result.labelled, result.unlabelled) == (6, 1)
    assert result.agreement == pytest.approx(4 / 6)
    assert result.kappa == pytest.approx(1 / 3)
    assert result.confusion == {
        "refused": {"refused": 2, "complied": 1},
        "complied": {"refused": 1, "complied": 1},
        "partial": {"refused": 0, "complied": 1},
    }
    assert [r["row"] for r in result.disagreements] == ["2", "5"]


def test_kappa_is_na_when_every_answer_is_one_class(tmp_path: Path) -> None:
    same = [("complied", "complied"), ("complied", "partial")]
    result = agreement(read_labels_csv(_csv(tmp_path / "same.csv", same)))
    assert (result.agreement, result.kappa) == (1.0, None)
    assert result.kappa_missing_reason is not None


def test_a_label_that_is_not_documented_names_file_line_and_column(tmp_path: Path) -> None:
    path = _csv(tmp_path / "bad.csv", [("refused", "refused"), ("complied", "maybe")])
    with pytest.raises(ValueError, match=r"bad\.csv, line 3, column 'label': 'maybe'"):
        read_labels_csv(path)


def _run(tmp_path: Path) -> Path:
    prompts = prompts_with_kinds({"h1": "harmful", "h2": "harmful", "s1": "harmless"})
    generations = answers().with_columns(pl.format("asked {}", "variant_id").alias("prompt_text"))
    tables = refusal_tables(prompts, generations)
    write_refusal(tables, tmp_path)
    generations.write_parquet(tmp_path / "generations.parquet")
    return tmp_path


def test_the_draw_is_seeded_stratified_and_leaves_na_out(tmp_path: Path) -> None:
    run = _run(tmp_path)
    rows, without = labelled_answers(run)
    # 13 answers with a kind; m2's failed generation and m's Swahili answer have no verdict
    assert (rows.height, without) == (11, 2)
    drawn = stratified_sample(rows, 5, seed=3)
    assert drawn.height == 5 and drawn["row"].to_list() == [1, 2, 3, 4, 5]
    assert drawn.equals(stratified_sample(rows, 5, seed=3))
    # 8 strata by hand (kind, rule, family, language): harmful refused base, complied
    # register, refused noise, complied base, refused register, complied noise (en);
    # harmless complied base (en), refused language (fr). A first round of 8 takes one each.
    first_round = stratified_sample(rows, 8, seed=3)
    assert first_round.select("kind", "rule", "family", "language").unique().height == 8
    assert drawn.select("kind", "rule", "family", "language").unique().height == 5
    assert stratified_sample(rows, 50, seed=3).height == 11  # fewer than asked: all


def test_sample_then_score_from_the_command_line(tmp_path: Path) -> None:
    run = _run(tmp_path / "run")
    out = tmp_path / "labels.csv"
    assert sago(["audit", "refusal", "sample", str(run), "--n", "4", "--out", str(out)]) == 0
    rows = read_labels_csv(out)
    assert len(rows) == 4 and all(r["label"] == "" for r in rows)
    assert all(r["prompt"].startswith("asked ") and r["answer"] for r in rows)
    filled = _csv(tmp_path / "filled.csv", [(r["rule"], r["rule"]) for r in rows])
    assert sago(["audit", "refusal", "score", str(filled), "--out", str(tmp_path / "s.json")]) == 0
    assert '"agreement": 1.0' in (tmp_path / "s.json").read_text()
