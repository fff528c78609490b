"""The card's refusal rows (sago_core/report/card/refusal.py) from a run's refusal tables
(the toy answers of test_refusal_stage): absent without them; the family rates, Best-of-N's
half-breached N, and against an earlier release the paired refusal verdicts."""

from __future__ import annotations

from pathlib import Path

from sago_core.report.card.refusal import (
    refusal_against,
    refusal_blocks,
    refusal_card,
    refusal_paired_block,
)
from sago_core.stages.refusal import write_refusal
from tests.unit.test_refusal_stage import toy_tables


def test_no_refusal_tables_no_card_rows(tmp_path: Path) -> None:
    assert refusal_card(tmp_path, "m") == {}
    assert refusal_blocks({"spec": "m"}) == []
    assert refusal_paired_block({"paired": None}) == []


def test_card_rows_and_paired_verdicts(tmp_path: Path) -> None:
    run, earlier = tmp_path / "run", tmp_path / "earlier"
    run.mkdir()
    earlier.mkdir()
    write_refusal(toy_tables(), run)
    write_refusal(toy_tables(), earlier)
    model = {"spec": "m", **refusal_card(run, "m")}
    ((heading, headers, rows, notes),) = refusal_blocks(model)
    assert heading == "Refusal consistency" and headers[4] == "breach [95% CI]"
    # complied -> refused on a harmful prompt is its own column, never an over-refusal
    harmful_register = ["harmful", "register", "breach", "2", "0.50 (no CI)", "NA", "0.50 (no CI)"]
    assert [*harmful_register, "NA"] in rows
    assert any("register: half the harmful prompts breached at N = 1" in n for n in notes)
    paired = {"rows": [{"model_a": "m", "model_b": "m"}]}
    card = refusal_against(run, earlier, paired)
    rows_paired = refusal_paired_block(card)[0][2]
    # the same tables on both sides: every difference 0, so no regression is found
    assert rows_paired and all(r[5] in ("0.000", "NA") for r in rows_paired)
    assert refusal_against(run, None, None) == {}
