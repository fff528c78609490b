"""The consistency study's design check: can a pair be significant at all?

The smallest attainable p of the block-permutation test is found here by brute force over
the block-permutation group (blocks built independently of the code), Holm's and BH's
smallest corrected p by hand, and the critical |r| of the t-test from scipy."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml
from scipy import stats

from sago_core.statistics.partial_correlation import block_permutation_p
from sago_core.study.config import StudyStatistics, build_study_config
from sago_core.study.design import design_lines, reachability
from sago_core.study.matrix import partial_correlation_table, sign_agreement
from sago_core.study.report import render_study
from sago_core.study.summary import detectable_rows
from tests.unit.test_consistency_stats import _brute_force_block_p

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "consistency.yaml"


def _brute_force_smallest_p(n: int, length: int) -> float:
    """Every ordering of the blocks of n checkpoints, with identical residuals (the most
    extreme data): the share of orderings at least as extreme as the observed."""
    residuals = np.random.default_rng(n).normal(size=n)
    return _brute_force_block_p(residuals, residuals, length)


def test_seven_checkpoints_in_blocks_of_two_cannot_survive_holm_over_ten_pairs() -> None:
    smallest = _brute_force_smallest_p(7, 2)
    assert smallest == pytest.approx(1 / 24)  # 4 blocks, only the identity ordering
    assert 10 * smallest == pytest.approx(10 / 24) and 10 * smallest > 0.05  # Holm's 1st step
    check = reachability("finetune", 7, 10, "permutation", 0.05, "linear", 2)
    assert check.smallest_p == pytest.approx(1 / 24)
    assert check.smallest_holm == pytest.approx(10 / 24)
    assert check.smallest_bh == pytest.approx(1 / 24)  # every pair at the minimum
    assert not check.reachable and "NO pair can be significant" in check.reason
    assert check.checkpoints_needed == 11 and "11 checkpoints" in check.reason


def test_the_fewest_checkpoints_for_reachable_significance_match_brute_force() -> None:
    """Holm over 10 pairs at alpha 0.05, blocks of 2: walk n up by enumeration."""
    first = None
    for n in range(7, 12):
        reachable = 10 * _brute_force_smallest_p(n, 2) <= 0.05
        assert reachability("f", n, 10).reachable == reachable, n
        if reachable and first is None:
            first = n
    assert first == 11  # 6 blocks: 720 orderings, 10 / 720 = 0.0139
    assert reachability("f", 10, 10).checkpoints_needed == first
    # and the code's own permutation test reaches exactly that smallest p there
    residuals = np.random.default_rng(0).normal(size=11)
    perm = block_permutation_p(residuals, residuals.copy(), block_length=2)
    assert perm.p_value == pytest.approx(1 / 720)


def test_fewer_pairs_need_fewer_checkpoints_and_the_t_test_is_always_reachable() -> None:
    # 3 pairs: 4 blocks give 3/24 = 0.125 > 0.05; 5 blocks (9 checkpoints) 3/120 = 0.025
    assert not reachability("f", 8, 3).reachable
    assert reachability("f", 8, 3).checkpoints_needed == 9
    assert reachability("f", 9, 3).reachable
    t_test = reachability("f", 7, 10, "t")
    assert t_test.reachable and t_test.smallest_p == 0.0
    # random orderings: the smallest p is 1 / (draws + 1) whatever the checkpoints
    few = reachability("f", 20, 10, draws=99)
    assert few.smallest_p == pytest.approx(0.01) and few.smallest_holm == pytest.approx(0.1)
    assert not few.reachable and few.checkpoints_needed is None
    assert "raise permutation_draws" in few.reason


def _study(n: int, oods: int) -> pl.DataFrame:
    rng = np.random.default_rng(n)
    ident = np.linspace(0, 1, n)
    columns = {"id": ident} | {f"o{i}": ident + rng.normal(size=n) for i in range(oods)}
    rows = [
        {"series": "ft", "position": i, "model": f"m{i}", "dataset": d, "metric": "m", "value": v}
        for d, values in columns.items()
        for i, v in enumerate(values.tolist())
    ]
    return pl.DataFrame(rows)


def test_the_detectable_table_takes_its_critical_r_from_the_test_used() -> None:
    table = partial_correlation_table(_study(7, 5), "id", [f"o{i}" for i in range(5)])
    rows = {r["method"]: r for r in detectable_rows(table, None, 0.05, "permutation", 2)}
    linear = rows["linear"]
    assert linear["pairs"] == 10 and linear["reachable"] is False
    assert linear["smallest_holm"] == pytest.approx(10 / 24)
    # no t-based number for a permutation test that cannot reach significance
    assert linear["critical_r_holm"] is None and linear["critical_r"] is None
    assert linear["detectable_r"] is None and "11 checkpoints" in linear["note"]
    t_rows = {r["method"]: r for r in detectable_rows(table, None, 0.05, "t", 2)}
    df = 7 - 3
    t = stats.t.ppf(1 - 0.05 / 10 / 2, df)  # Holm's first step: alpha / pairs, two-sided
    assert t_rows["linear"]["critical_r_holm"] == pytest.approx(t / math.sqrt(df + t * t))
    assert t_rows["linear"]["reachable"] is True


def test_the_report_and_the_plan_say_when_significance_is_unreachable() -> None:
    table = partial_correlation_table(_study(7, 5), "id", [f"o{i}" for i in range(5)])
    oods = [f"o{i}" for i in range(5)]
    settings = {
        "series": {"ft": [f"m{i}" for i in range(7)]},
        "in_distribution": "id",
        "out_of_distribution": oods,
        "statistics": StudyStatistics(report_metric="m").model_dump(mode="json"),
    }
    split = {
        "evaluation_prompts": 1,
        "evaluation_datasets": ["id", *oods],
        "check": "none",
        "checkpoints": [],
    }
    page = render_study(_study(7, 5), table, sign_agreement(table), settings, split)
    assert "significance is UNREACHABLE" in page and "11 checkpoints per series" in page
    assert page.index("Can this study reach significance?") < page.index("Training split")
    lines = design_lines([reachability("ft", 7, 10)])
    assert lines[0].startswith("Design check: significance is UNREACHABLE")


def test_the_example_study_can_reach_significance_and_says_so_first() -> None:
    first = EXAMPLE.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("# Significance is reachable")
    values = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    study = build_study_config(values, source=str(EXAMPLE))
    checks = study.design_check()
    assert checks and all(c.reachable for c in checks)
    pairs = math.comb(len(study.out_of_distribution), 2)
    for family, models in study.series.items():  # by hand: blocks of 2, exact orderings
        blocks = math.ceil(len(models) / study.statistics.block_length)
        assert pairs / math.factorial(blocks) <= study.statistics.alpha, family
    assert "alpaca" not in study.out_of_distribution  # no gold answers


def test_the_closing_note_can_open_with_the_design_check() -> None:
    from sago_core.study.summary import pair_markdown

    table = partial_correlation_table(_study(7, 3), "id", ["o0", "o1", "o2"])
    lines = design_lines([reachability("ft", 7, 3)])
    note = pair_markdown(table, "m", "linear", lines).splitlines()
    assert note[: len(lines)] == lines and note[0].startswith("Design check: significance is UNR")
    assert note[len(lines)].startswith("| series |")
