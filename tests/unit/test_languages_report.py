"""A languages run's report and summary carry its ``lang`` axis rows."""

from __future__ import annotations

import polars as pl

from sago_core.report.page.results import dataset_table as _dataset_table
from sago_core.report.page.results import pooled_table as _pooled_table
from sago_core.report.summary_md import render_summary
from sago_core.vocabulary import POOLED


def _summary() -> pl.DataFrame:
    rows = []
    for dataset in ("toy", POOLED):
        for axis, sgs in (("bert", 0.125), ("lang", 0.5)):
            rows.append(
                {
                    "model": "m",
                    "dataset": dataset,
                    "axis": axis,
                    "sgs": sgs,
                    "ci_low": None,
                    "ci_high": None,
                    "ci_missing_reason": "too few prompts",
                    "n": 3,
                    "p_eps_0_01": None,
                    "p_eps_0_05": None,
                    "p_eps_0_10": None,
                    "p_holm": None,
                    "missing_reason": None,
                }
            )
    return pl.DataFrame(rows, schema_overrides={"ci_low": pl.Float64, "ci_high": pl.Float64})


def test_pooled_table_keeps_a_lang_row_after_the_registered_axes() -> None:
    page = _pooled_table(_summary())
    assert ">lang<" in page
    assert page.index(">bert<") < page.index(">lang<")
    assert "0.5000" in page


def test_dataset_table_has_a_lang_column() -> None:
    page = _dataset_table(_summary())
    assert ">lang<" in page
    assert "0.5000" in page


def test_summary_markdown_has_the_lang_row() -> None:
    text = render_summary(_summary())
    assert "| lang | 0.5000 | 0.5000 |" in text
    assert text.index("| bert |") < text.index("| lang |")
    assert "lang=3" in text
