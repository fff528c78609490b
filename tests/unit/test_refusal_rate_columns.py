"""refusal_rates.parquet's columns hold one thing each: complied -> refused is an
over-refusal on a harmless row and "refused after rewording" on a harmful one; refused ->
complied a breach on a harmful row and "answered after rewording" on a harmless one. A table
or a card written before the split, whose ``over_refusal_*`` and ``breach_*`` held both,
reads the same way."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from sago_core.artifacts.layout import RunLayout
from sago_core.refusal.flips import RATES_SCHEMA, refusal_rates, split_rates
from sago_core.report.card.refusal import refusal_blocks
from sago_core.tracking.record import refusal_metrics

# A saved table as the writer wrote it before the split (no refused_after_rewording_*).
OLD = pl.DataFrame(
    {
        "model": ["m", "m"],
        "level": ["family", "family"],
        "kind": ["harmful", "harmless"],
        "family": ["register", "register"],
        "subtype": [None, None],
        "strength": [None, None],
        "failure": ["breach", "over_refusal"],
        "n_prompts": [4, 3],
        "breach_rate": [0.25, 0.125],
        "breach_low": [0.0, 0.0],
        "breach_high": [0.5, 0.25],
        "over_refusal_rate": [0.75, 1 / 3],
        "over_refusal_low": [0.5, 0.0],
        "over_refusal_high": [1.0, 0.67],
        "failure_rate": [0.25, 1 / 3],
        "interval_missing_reason": [None, None],
    },
    schema_overrides={
        "subtype": pl.Utf8,
        "strength": pl.Float64,
        "interval_missing_reason": pl.Utf8,
    },
)


def test_an_old_table_reads_with_one_meaning_per_column() -> None:
    split = split_rates(OLD)
    harmful, harmless = split.to_dicts()
    assert harmful["over_refusal_rate"] is None and harmful["over_refusal_high"] is None
    assert harmful["refused_after_rewording_rate"] == 0.75
    assert harmful["refused_after_rewording_low"] == 0.5
    assert harmless["over_refusal_rate"] == 1 / 3 and harmless["over_refusal_high"] == 0.67
    assert harmless["refused_after_rewording_rate"] is None
    assert harmful["breach_rate"] == 0.25 and harmful["answered_after_rewording_rate"] is None
    assert harmless["breach_rate"] is None and harmless["breach_high"] is None
    assert harmless["answered_after_rewording_rate"] == 0.125
    assert harmless["answered_after_rewording_high"] == 0.25
    assert split.columns[:2] == ["model", "level"]
    assert split.columns[2:] == list(RATES_SCHEMA)
    assert split_rates(split).equals(split)  # a table already split is left as it is


def test_the_writer_splits_the_direction_by_kind() -> None:
    # one prompt per kind, one variant each: the harmful one refused only after the rewording,
    # the harmless one answered only after it
    flips = pl.DataFrame(
        {
            "dataset": ["d", "d"],
            "prompt_id": ["a", "b"],
            "kind": ["harmful", "harmless"],
            "variant_id": ["v", "v"],
            "family": ["noise", "noise"],
            "subtype": ["x", "x"],
            "strength": [1.0, 1.0],
            "breach_excess": [0.0, 1.0],
            "over_refusal_excess": [1.0, 0.0],
        }
    )
    rates = {r["kind"]: r for r in refusal_rates(flips).to_dicts()}
    assert rates["harmful"]["refused_after_rewording_rate"] == 1.0
    assert rates["harmful"]["over_refusal_rate"] is None
    assert rates["harmless"]["over_refusal_rate"] == 0.0
    assert rates["harmless"]["refused_after_rewording_rate"] is None
    assert rates["harmful"]["breach_rate"] == 0.0
    assert rates["harmful"]["answered_after_rewording_rate"] is None
    assert rates["harmless"]["answered_after_rewording_rate"] == 1.0
    assert rates["harmless"]["breach_rate"] is None
    assert rates["harmless"]["failure_rate"] == 0.0 and rates["harmful"]["failure_rate"] == 0.0


def test_an_old_card_and_an_old_file_show_the_split(tmp_path: Path) -> None:
    old_card_rows = OLD.drop("model", "level").to_dicts()  # card.json's rates, as written then
    ((_, headers, rows, _),) = refusal_blocks(
        {"refusal": {"rates": old_card_rows, "best_of_n": []}}
    )
    assert headers[-2:] == ["refused after rewording", "answered after rewording"]
    assert rows[0][4:] == ["0.25 [0.00, 0.50]", "NA", "0.75 [0.50, 1.00]", "NA"]
    assert rows[1][4:] == ["NA", "0.33 [0.00, 0.67]", "NA", "0.12 [0.00, 0.25]"]
    layout = RunLayout.of(tmp_path, "run")
    layout.run_dir.mkdir(parents=True)
    OLD.write_parquet(layout.run_dir / "refusal_rates.parquet")
    metrics = refusal_metrics(layout, "m")
    assert metrics["refused_after_rewording_rate/harmful/register"] == 0.75
    assert "over_refusal_rate/harmful/register" not in metrics
    assert metrics["over_refusal_rate/harmless/register"] == 1 / 3
    assert metrics["answered_after_rewording_rate/harmless/register"] == 0.125
    assert "breach_rate/harmless/register" not in metrics
