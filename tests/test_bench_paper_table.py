"""``make bench-paper``'s arithmetic on hand-made numbers: per-stage sums and peaks, the ratios
and their verdicts, the post-scoring share, the log-log exponent and the memory growth.
Every expected value below is worked out by hand in its comment."""

from __future__ import annotations

import pytest

from bench.paper_table import (
    Ratio,
    StageRecord,
    loglog_exponent,
    memory_growth,
    peak_between,
    post_scoring_seconds,
    rate,
    ratio_table,
    scale_table,
    stage_rows,
    stage_table,
    steady_rate,
    verdict,
)

# generate shards ran in [10, 20] and [21, 26], the scoring pass in [27, 30], then the rest.
RECORDS = [
    StageRecord("generate", 10.0, 4, 100, 20.0, tokens=40),
    StageRecord("generate", 5.0, 2, 50, 26.0, tokens=20),
    StageRecord("analyse", 3.0, 6, 30, 30.0, tokens=90),
    StageRecord("assemble", 1.0, 6, 10, 31.0),
    StageRecord("score-pairs", 7.0, 5, 20, 38.0),
    StageRecord("detect-mirroring", 2.0, 5, 5, 40.0),
    StageRecord("compute-deltas", 0.5, 30, 40, 40.5),
    StageRecord("render-report", 3.0, None, 1000, 43.5),
]
SAMPLES = [(5.0, 100.0), (12.0, 500.0), (22.0, 700.0), (28.0, 650.0), (50.0, 999.0)]


def test_rate_and_peak() -> None:
    assert rate(10, 4) == 2.5
    assert rate(None, 4) is None
    assert rate(5, 0) is None
    samples = [(1.0, 100.0), (2.0, 300.0), (3.0, 200.0), (5.0, 900.0)]
    assert peak_between(samples, 1.5, 3.0) == 300.0
    assert peak_between(samples, 6.0, 7.0) is None


def test_stage_rows_sum_records_and_take_the_peak_of_their_windows() -> None:
    rows = {r.stage: r for r in stage_rows(RECORDS, SAMPLES)}
    generate = rows["generate"]
    assert (generate.records, generate.seconds, generate.items, generate.tokens) == (2, 15.0, 6, 60)
    assert generate.bytes == 150
    assert generate.peak_rss_mib == 700.0  # 500 in the first window, 700 in the second
    assert generate.tokens_per_s == 4.0  # 60 / 15
    assert generate.items_per_s == pytest.approx(0.4)  # 6 / 15
    assert rows["analyse"].peak_rss_mib == 650.0
    assert rows["assemble"].peak_rss_mib is None  # no sample in [30, 31]
    assert rows["render-report"].items is None
    assert list(rows) == [
        "generate",
        "analyse",
        "assemble",
        "score-pairs",
        "detect-mirroring",
        "compute-deltas",
        "render-report",
    ]


def test_post_scoring_leaves_out_bertscore_and_mirroring() -> None:
    assert post_scoring_seconds(RECORDS) == 4.5  # assemble 1 + deltas 0.5 + report 3


def test_steady_rate_drops_the_first_shard() -> None:
    assert steady_rate(RECORDS, "generate") == 4.0  # 20 tokens / 5 s
    assert steady_rate(RECORDS, "analyse") is None  # one record only


def test_ratio_values_and_verdicts() -> None:
    ratio = Ratio("generation", "tokens/s", 90.0, 100.0, 95.0)
    assert ratio.value == pytest.approx(0.9)
    assert ratio.steady == pytest.approx(0.95)
    assert ratio.target == 0.9
    assert Ratio("BERTScore", "pairs/s", None, 10.0).value is None
    assert verdict(0.9, 0.9) == "met"
    assert verdict(0.79, 0.8) == "MISSED"
    assert verdict(0.04, 0.05, at_most=True) == "met"
    assert verdict(0.06, 0.05, at_most=True) == "MISSED"
    assert verdict(None, 0.9) == "not measured"


def test_loglog_exponent_and_memory_growth() -> None:
    assert loglog_exponent([1, 2, 4], [3, 6, 12]) == pytest.approx(1.0)
    assert loglog_exponent([1, 2, 4], [1, 4, 16]) == pytest.approx(2.0)
    # log2: x = 0, 1, 2; y = 1, 2, 4; slope = ((-1)(-4/3) + (1)(5/3)) / 2 = 1.5
    assert loglog_exponent([1, 2, 4], [2, 4, 16]) == pytest.approx(1.5)
    assert loglog_exponent([3, 3], [1, 2]) is None
    assert loglog_exponent([1, 2], [1, 0]) is None
    assert memory_growth([100.0, 105.0, 110.0]) == pytest.approx(0.10)
    assert memory_growth([100.0, None]) is None


def test_tables_print_the_hand_computed_values() -> None:
    rows = stage_rows(RECORDS, SAMPLES)
    table = stage_table(rows, 200.0)
    assert "| generate | 2 | 15.0 | 7.5% | 6 | 0.4 | 4.0 | 700 | 0.00 |" in table
    ratios = ratio_table([Ratio("scoring pass", "tokens/s", 40.0, 50.0, None)], 5.0, 200.0)
    assert "| scoring pass (tokens/s) | 40.0 | 50.0 | 0.800 | NA | >= 0.8 | met |" in ratios
    assert ratios[-1].endswith("| 2.5% | | <= 5% | met |")
    double = [
        StageRecord(r.stage, 2 * (r.seconds or 0.0), r.rows, r.bytes, r.ended) for r in RECORDS
    ]
    curve = scale_table([10, 20], [rows, stage_rows(double, [])], [50.0, 100.0])
    line = next(x for x in curve if x.startswith("| generate |"))
    # both shards doubled: exponent 1; without the first shard 5 s -> 10 s, exponent 1 too
    assert line.startswith("| generate | 15.0 | 30.0 | 1.00 | 1.00 | 700 | NA | NA |")
    assert curve[-1].startswith("| whole run | 50.0 | 100.0 | 1.00 |")
    assert rows[0].steady_seconds == 5.0  # 15 s less the first shard's 10 s
    assert rows[1].steady_seconds is None  # the scoring pass was recorded once
