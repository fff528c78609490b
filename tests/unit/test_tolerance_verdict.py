"""The run's verdict per axis has one rule (scoring/verdict.py): the card and
``RunResult.verdicts`` both say it from the Holm-adjusted p-value of the reference test."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from sago.result import RunResult
from sago_core.artifacts.layout import SUMMARY_FILE
from sago_core.scoring.verdict import tolerance_verdict


def test_a_p_value_below_alpha_is_above_tolerance_else_not_shown_and_none_is_no_verdict() -> None:
    assert tolerance_verdict(0.001) == "above tolerance"
    assert tolerance_verdict(0.0499) == "above tolerance"
    assert tolerance_verdict(0.05) == "not shown above tolerance"  # rejects below alpha only
    assert tolerance_verdict(0.9) == "not shown above tolerance"
    assert tolerance_verdict(None) is None


def test_run_result_verdicts_follow_the_rule(tmp_path: Path) -> None:
    pl.DataFrame(
        {
            "model": ["m"] * 3,
            "dataset": ["d"] * 3,
            "axis": ["bleu", "bert", "mr"],
            "sgs": [0.3, 0.1, None],
            "p_holm": [0.01, 0.2, None],
            "missing_reason": [None, None, "too few prompts"],
        }
    ).write_parquet(tmp_path / SUMMARY_FILE)
    verdicts = RunResult(tmp_path).verdicts
    assert verdicts["verdict"].to_list() == ["above tolerance", "not shown above tolerance", None]
    assert verdicts["missing_reason"].to_list() == [None, None, "too few prompts"]
