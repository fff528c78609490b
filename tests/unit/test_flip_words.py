"""The tails' flip columns at K > 1 are the mean flip beyond the base's self-flip rate, not a
share of variants: the report's tail table, its headline and the card say which."""

from __future__ import annotations

from html import escape
from pathlib import Path

import polars as pl

from sago_core.artifacts.layout import INSTANCES_FILE, TAILS_FILE
from sago_core.report.card.build import _tails
from sago_core.report.card.render import _tails_block
from sago_core.report.flip_words import AT_K, BEYOND, SHARES, sampled, sampled_run
from sago_core.report.page.headline import _flips_html
from sago_core.report.sections.insights import tails_section
from sago_core.stages.instances import SAMPLED_COLUMNS

TAILS = pl.DataFrame(
    {
        "model": ["m"],
        "dataset": ["__pooled__"],
        "family": ["__all__"],
        "axis": ["bert"],
        "n": [4],
        "q50": [0.1],
        "q90": [0.2],
        "q99": [0.3],
        "max": [0.4],
        "share_over_0_05": [0.5],
        "share_over_0_10": [0.25],
        "flip_right_to_wrong": [-0.125],
        "flip_wrong_to_right": [0.0625],
    }
)
SUMMARY = pl.DataFrame({"model": ["m"], "dataset": ["__pooled__"], "axis": ["bert"], "sgs": [0.2]})


def _instances(at_k: bool) -> pl.DataFrame:
    frame = pl.DataFrame({"model": ["m"], "variant_id": ["v"]})
    if at_k:
        frame = frame.with_columns(
            pl.lit(None, dtype).alias(c) for c, dtype in SAMPLED_COLUMNS.items()
        )
    return frame


def test_the_tail_table_names_the_flip_excess_at_k() -> None:
    plain = tails_section(TAILS, SUMMARY)
    assert all(label in plain for label in SHARES) and AT_K not in plain
    at_k = tails_section(TAILS, SUMMARY, at_k=sampled(_instances(True)))
    assert all(escape(label) in at_k for label in BEYOND) and AT_K in at_k
    assert "<td>-0.1250" in at_k  # a negative excess is shown as it is
    assert not sampled(_instances(False)) and not sampled(None)


def test_the_headline_says_beyond_the_self_flip_at_k() -> None:
    row = TAILS.row(0, named=True)
    assert "self-flip" not in _flips_html(row, None)
    assert _flips_html(row, None, at_k=True).startswith("mean beyond the base's self-flip rate")


def test_the_card_labels_its_flip_columns_by_the_runs_k(tmp_path: Path) -> None:
    TAILS.write_parquet(tmp_path / TAILS_FILE)
    for at_k in (False, True):
        _instances(at_k).write_parquet(tmp_path / INSTANCES_FILE)
        assert sampled_run(tmp_path) is at_k
        tails = _tails(tmp_path, "m")
        _, headers, rows, notes = _tails_block({"tails": tails})
        assert headers[-2:] == list(BEYOND if at_k else SHARES)
        assert notes == ([AT_K] if at_k else [])
        assert rows[0][-2].startswith("-0.12")


def test_the_language_tables_flip_columns_say_which() -> None:
    from sago_core.report.sections.language import _headers

    for at_k in (False, True):
        headers, _ = _headers(pl.DataFrame({"flips_at_k": [at_k]}), "language")
        assert headers[-3:-1] == list(BEYOND if at_k else SHARES)
    assert _headers(pl.DataFrame({"model": ["m"]}), "language")[0][-3:-1] == list(SHARES)
