"""Paired comparison of two runs: every number is checked against scipy on
hand-built per-prompt scores, never against the code under test."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy import stats

from sago_cli.main import main
from sago_core.errors import ConfigError, InputError
from sago_core.statistics.intervals import interval_refusal
from sago_core.statistics.paired import paired_test
from sago_core.statistics.paired_runs import compare_paired, paired_table
from sago_core.vocabulary import POOLED

MARGIN = 0.02
DATASETS = ("d1", "d2")
AXES = ("act", "bleu")


def _holm(p: list[float]) -> list[float]:
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    out, running = [0.0] * m, 0.0
    for k, i in enumerate(order):
        running = max(running, min(1.0, p[i] * (m - k)))
        out[i] = running
    return out


def _hand_tost(diffs: np.ndarray, margin: float) -> float:
    lower = stats.ttest_1samp(diffs, -margin, alternative="greater").pvalue
    upper = stats.ttest_1samp(diffs, margin, alternative="less").pvalue
    return float(max(lower, upper))


def _scores(model: str, values: dict[tuple[str, str], np.ndarray]) -> pl.DataFrame:
    rows = []
    for (dataset, axis), s in values.items():
        for i, value in enumerate(s):
            rows.append(
                {
                    "model": model,
                    "dataset": dataset,
                    "prompt_id": f"{dataset}-{i}",
                    "axis": axis,
                    "s": float(value),
                }
            )
    return pl.DataFrame(rows)


def _pair(shift: dict[tuple[str, str], float], n: int = 12, noise: float = 0.01, seed: int = 0):
    rng = np.random.default_rng(seed)
    a, b = {}, {}
    for dataset in DATASETS:
        for axis in AXES:
            base = rng.uniform(0.1, 0.6, n)
            a[(dataset, axis)] = base
            b[(dataset, axis)] = base + shift.get((dataset, axis), 0.0) + rng.normal(0, noise, n)
    return a, b


def test_each_row_matches_scipy_and_a_hand_tost() -> None:
    a, b = _pair({("d1", "act"): 0.05, ("d2", "act"): 0.03}, noise=0.04)
    table = paired_table(_scores("A", a), _scores("B", b), [("A", "B")], MARGIN)
    assert table.height == len(AXES) * (len(DATASETS) + 1)
    for row in table.filter(pl.col("dataset") != POOLED).iter_rows(named=True):
        sa, sb = a[(row["dataset"], row["axis"])], b[(row["dataset"], row["axis"])]
        assert row["n"] == len(sa)
        assert row["mean_diff"] == pytest.approx(float(np.mean(sb - sa)), abs=1e-12)
        assert row["p_paired_t"] == pytest.approx(stats.ttest_rel(sb, sa).pvalue, rel=1e-9)
        assert row["p_wilcoxon"] == pytest.approx(stats.wilcoxon(sb, sa).pvalue, rel=1e-9)
        assert row["p_tost"] == pytest.approx(_hand_tost(sb - sa, MARGIN), rel=1e-9)
        assert row["ci_low"] < row["mean_diff"] < row["ci_high"]
        assert row["margin"] == MARGIN and row["correction_family"] == "datasets"
    for row in table.filter(pl.col("dataset") == POOLED).iter_rows(named=True):
        sa = np.concatenate([a[(d, row["axis"])] for d in DATASETS])
        sb = np.concatenate([b[(d, row["axis"])] for d in DATASETS])
        means = [np.mean(b[(d, row["axis"])] - a[(d, row["axis"])]) for d in DATASETS]
        assert row["n"] == len(sa) and row["correction_family"] == "pooled"
        assert row["mean_diff"] == pytest.approx(float(np.mean(sb - sa)), abs=1e-12)
        assert row["mean_diff_datasets"] == pytest.approx(float(np.mean(means)), abs=1e-12)
        assert row["ci_low"] < row["mean_diff"] < row["ci_high"]
        assert row["p_paired_t"] == pytest.approx(stats.ttest_rel(sb, sa).pvalue, rel=1e-9)
        assert row["p_wilcoxon"] == pytest.approx(stats.wilcoxon(sb, sa).pvalue, rel=1e-9)
        assert row["p_tost"] == pytest.approx(_hand_tost(sb - sa, MARGIN), rel=1e-9)


def test_holm_and_bh_run_over_per_dataset_rows_and_pooled_rows_apart() -> None:
    a, b = _pair({("d1", "act"): 0.04, ("d2", "bleu"): -0.03}, noise=0.03, seed=3)
    table = paired_table(_scores("A", a), _scores("B", b), [("A", "B")], MARGIN)
    for family, size in (("datasets", len(DATASETS) * len(AXES)), ("pooled", len(AXES))):
        rows = table.filter(pl.col("correction_family") == family)
        assert rows.height == size
        raw = rows["p_paired_t"].to_list()
        assert rows["p_holm"].to_list() == pytest.approx(_holm(raw), rel=1e-9)
        assert rows["p_bh"].to_list() == pytest.approx(
            list(stats.false_discovery_control(raw, method="bh")), rel=1e-9
        )
        assert rows["p_tost_holm"].to_list() == pytest.approx(
            _holm(rows["p_tost"].to_list()), rel=1e-9
        )


def test_verdicts_follow_the_corrected_tests() -> None:
    shifts = {("d1", "act"): 0.10, ("d2", "act"): 0.10, ("d1", "bleu"): -0.10}
    a, b = _pair(shifts, n=30, noise=0.005, seed=1)
    b[("d2", "bleu")] = a[("d2", "bleu")] + np.random.default_rng(9).normal(0, 0.2, 30)
    table = paired_table(_scores("A", a), _scores("B", b), [("A", "B")], MARGIN)
    got = {(r["dataset"], r["axis"]): r["verdict"] for r in table.iter_rows(named=True)}
    assert got[("d1", "act")] == got[("d2", "act")] == got[(POOLED, "act")] == "b_worse"
    assert got[("d1", "bleu")] == "b_better"
    assert got[("d2", "bleu")] == "inconclusive"  # sd 0.2 on 30 prompts: neither test rejects
    # the hand TOST on that row agrees: far from rejecting equivalence's null
    d2 = b[("d2", "bleu")] - a[("d2", "bleu")]
    assert (
        _hand_tost(d2, MARGIN) > 0.05
        and stats.ttest_rel(b[("d2", "bleu")], a[("d2", "bleu")]).pvalue > 0.05
    )

    a, b = _pair({}, n=30, noise=0.004, seed=2)
    same = paired_table(_scores("A", a), _scores("B", b), [("A", "B")], MARGIN)
    for row in same.iter_rows(named=True):
        d = (
            b[(row["dataset"], row["axis"])] - a[(row["dataset"], row["axis"])]
            if row["dataset"] != POOLED
            else None
        )
        if d is not None:
            assert _hand_tost(d, MARGIN) * 4 < 0.05  # Holm over 4 rows still rejects
        assert row["verdict"] == "equivalent"


def test_bootstrap_interval_agrees_with_the_t_interval_on_many_prompts() -> None:
    rng = np.random.default_rng(5)
    diffs = rng.normal(0.03, 0.05, 400)
    test = paired_test([diffs], MARGIN, seed=11)
    low, high = stats.t.interval(0.95, len(diffs) - 1, diffs.mean(), stats.sem(diffs))
    half = (high - low) / 2
    assert test.ci_low == pytest.approx(low, abs=0.15 * half)
    assert test.ci_high == pytest.approx(high, abs=0.15 * half)


def test_identical_runs_are_equivalent_and_too_few_prompts_have_no_test() -> None:
    a, _ = _pair({}, n=5)
    table = paired_table(_scores("A", a), _scores("B", a), [("A", "B")], MARGIN)
    assert set(table["verdict"]) == {"equivalent"}
    assert set(table["p_paired_t"]) == {1.0} and set(table["p_tost"]) == {0.0}
    one = {k: v[:1] for k, v in a.items()}
    short = paired_table(_scores("A", one), _scores("B", one), [("A", "B")], MARGIN)
    per_dataset = short.filter(pl.col("dataset") != POOLED)
    assert per_dataset["verdict"].is_null().all() and per_dataset["p_holm"].is_null().all()
    assert set(per_dataset["missing_reason"]) == {"fewer than two prompts with s on both sides"}
    assert short.filter(pl.col("dataset") == POOLED)["n"].to_list() == [2, 2]
    # five prompts per dataset and axis: intervals per dataset; two: none, with the reason
    assert table["ci_low"].null_count() == 0
    two = {k: v[:2] for k, v in a.items()}
    shifted = {k: v + np.array([0.01, 0.03]) for k, v in two.items()}
    small = paired_table(_scores("A", two), _scores("B", shifted), [("A", "B")], MARGIN)
    rows = small.filter(pl.col("dataset") != POOLED)
    assert rows["ci_low"].is_null().all() and rows["ci_high"].is_null().all()
    assert set(rows["ci_missing_reason"]) == {interval_refusal(2)}
    assert rows["p_paired_t"].is_not_null().all()  # the test itself still runs


# --- two run folders on disk -----------------------------------------------------------

CONFIG = {
    "seed": 0,
    "variants": {"noise": {"spacing": [5, 20]}, "replay": True},
    "generation": {"max_new_tokens": 40, "batch_size": 64, "use_model_defaults": False},
    "bertscore": {"model": "minilm-l6", "num_layers": 6, "semantic_threshold": 0.78},
    "judge": {"model": None},
}


def _run(folder: Path, model: str, values: dict, config: dict | None = None) -> Path:
    folder.mkdir(parents=True)
    scores = _scores(model, values)
    scores.write_parquet(folder / "scores.parquet")
    prompts = scores.select("dataset", "prompt_id").unique().sort("prompt_id")
    prompts = prompts.with_columns(pl.format("question {}", pl.col("prompt_id")).alias("prompt"))
    prompts.write_parquet(folder / "prompts.parquet")
    for name in ("summary", "deltas", "variants", "generations"):
        pl.DataFrame({"x": [1]}).write_parquet(folder / f"{name}.parquet")
    (folder / "manifest.json").write_text("{}")
    (folder / "run_config.json").write_text(json.dumps({**CONFIG, **(config or {})}))
    return folder


def test_compare_paired_writes_the_table_and_refuses_other_prompts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = _pair({("d1", "act"): 0.1}, noise=0.01)
    run_a = _run(tmp_path / "a", "hf:old", a)
    run_b = _run(tmp_path / "b", "hf:new", b)
    out = tmp_path / "cmp" / "paired.parquet"
    assert main(["compare", str(run_a), str(run_b), "--paired", "--out", str(out)]) == 0
    table = pl.read_parquet(out)
    assert set(table["model_a"]) == {"hf:old"} and set(table["model_b"]) == {"hf:new"}
    page = capsys.readouterr().out
    assert "b_worse" in page and (out.parent / "paired.md").read_text().count("| act |") == 3

    fewer = {k: v[:-2] for k, v in b.items()}
    run_c = _run(tmp_path / "c", "hf:new", fewer)
    with pytest.raises(InputError, match="missing from B") as error:
        compare_paired(run_a, run_c, MARGIN)
    assert "d1/d1-10" in str(error.value) and "d2/d2-11" in str(error.value)


def test_different_configs_are_refused_naming_the_settings_unless_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = _pair({})
    run_a = _run(tmp_path / "a", "hf:old", a)
    other = {"seed": 1, "variants": {"noise": {"spacing": [5]}, "replay": True}}
    other["generation"] = {**CONFIG["generation"], "batch_size": 8}  # not a comparability setting
    run_b = _run(tmp_path / "b", "hf:new", b, other)
    with pytest.raises(ConfigError) as error:
        compare_paired(run_a, run_b, MARGIN)
    message = str(error.value)
    assert "seed (seed): 0 vs 1" in message and "variants.noise.spacing (variant grid)" in message
    assert "batch_size" not in message
    out = tmp_path / "p.parquet"
    argv = ["compare", str(run_a), str(run_b), "--paired", "--out", str(out)]
    assert main(argv) == 2
    assert main([*argv, "--allow-different-configs"]) == 0
    page = capsys.readouterr().out
    assert "Configs differ" in page and "seed (seed): 0 vs 1" in page
    assert pl.read_parquet(out).height == len(AXES) * (len(DATASETS) + 1)


def test_a_pooled_verdict_takes_its_sign_from_the_mean_its_tests_test() -> None:
    """Many prompts slightly worse in one dataset, two much better in another: the
    equal-weight mean is negative, the all-prompt mean (what the t-test tests) positive."""
    from sago_core.statistics.paired import paired_test, verdict

    rng = np.random.default_rng(3)
    big = 0.1 + rng.normal(0, 0.01, 100)
    small = np.array([-0.5, -0.52])
    test = paired_test([big, small], margin=0.02, seed=0)
    everything = np.concatenate([big, small])
    # (mean(big) + mean(small)) / 2
    assert test.mean_diff_datasets is not None and test.mean_diff_datasets < 0
    assert test.mean_diff == pytest.approx(float(everything.mean()))
    assert float(everything.mean()) > 0 and stats.ttest_1samp(everything, 0).pvalue < 0.01
    assert verdict(test.mean_diff, test.p_paired_t, 1.0) == "b_worse"


def test_the_pooled_row_shows_the_mean_and_interval_its_verdict_uses() -> None:
    """200 prompts that barely move and 10 that move by 0.05 (beyond the 0.02 margin): the
    all-prompt mean, which TOST tests, is well inside the margin, so the row reads
    "equivalent"; the old row showed beside it the dataset-weighted mean (about 0.025) with
    an interval crossing the margin. Now its mean and interval are those of the test, and
    the dataset-weighted mean sits beside them, labelled."""
    rng = np.random.default_rng(8)
    a = {("big", "act"): rng.uniform(0.1, 0.6, 200), ("small", "act"): rng.uniform(0.1, 0.6, 10)}
    b = {
        ("big", "act"): a[("big", "act")] + rng.normal(0.0, 0.01, 200),
        ("small", "act"): a[("small", "act")] + 0.05 + rng.normal(0.0, 0.01, 10),
    }
    table = paired_table(_scores("A", a), _scores("B", b), [("A", "B")], MARGIN)
    row = table.filter(pl.col("dataset") == POOLED).row(0, named=True)
    diffs = np.concatenate([b[k] - a[k] for k in (("big", "act"), ("small", "act"))])
    assert row["verdict"] == "equivalent"
    assert row["mean_diff"] == pytest.approx(float(diffs.mean()), abs=1e-12)
    weighted = (np.mean(b[("big", "act")] - a[("big", "act")]) + 0.05) / 2
    assert row["mean_diff_datasets"] == pytest.approx(float(weighted), abs=0.005)
    assert row["mean_diff_datasets"] > MARGIN  # the figure the old row showed
    # the interval is of the tested mean: inside the margin, like the TOST verdict
    low, high = stats.t.interval(0.95, len(diffs) - 1, diffs.mean(), stats.sem(diffs))
    assert row["ci_low"] == pytest.approx(low, abs=0.2 * (high - low))
    assert row["ci_high"] == pytest.approx(high, abs=0.2 * (high - low))
    assert -MARGIN < row["ci_low"] <= row["mean_diff"] <= row["ci_high"] < MARGIN
    from sago_core.report.compare.paired import render_paired
    from sago_core.statistics.paired_runs import PairedComparison

    page = render_paired(PairedComparison(table, []))
    line = next(x for x in page.splitlines() if x.startswith(f"| {POOLED} | act |"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    low_cell, high_cell = (float(x) for x in cells[4].strip("[]").split(","))
    assert float(cells[3]) == pytest.approx(row["mean_diff"], abs=5e-5)
    assert low_cell == pytest.approx(row["ci_low"], rel=1e-2, abs=5e-5)
    assert high_cell == pytest.approx(row["ci_high"], rel=1e-2, abs=5e-5)
    assert float(cells[5]) == pytest.approx(row["mean_diff_datasets"], abs=5e-5)
    assert cells[-1] == "equivalent"
    assert "dataset-weighted" in page


def test_runs_sampled_differently_are_refused_in_one_line_unless_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Temperature, top_p, top_k and K must match (a greedy run's saved
    config leaves them out: T 0, top_p 1, top_k 0, K 1); the sampling seed need not."""
    a, b = _pair({})
    greedy = _run(tmp_path / "greedy", "hf:old", a)
    sampled = {"temperature": 0.7, "top_p": 0.9, "samples": 8, "seed": 3}
    hot = _run(tmp_path / "hot", "hf:new", b, {"generation": {**CONFIG["generation"], **sampled}})
    with pytest.raises(ConfigError) as error:
        compare_paired(greedy, hot, MARGIN)
    message = str(error.value)
    assert "\n" not in message and "--allow-different-sampling" in message
    assert "generation.temperature 0.0 vs 0.7" in message
    assert "generation.top_p 1.0 vs 0.9" in message and "generation.samples 1 vs 8" in message
    assert "top_k" not in message and "seed" not in message
    out = tmp_path / "p.parquet"
    argv = ["compare", str(greedy), str(hot), "--paired", "--out", str(out)]
    assert main(argv) == 2
    assert main([*argv, "--allow-different-sampling"]) == 0
    page = capsys.readouterr().out
    assert "generation.samples (sampling): 1 vs 8" in page
    assert "decoding: A greedy (T 0, one answer per prompt text); B sampled at T 0.7" in page

    reseeded = {**CONFIG["generation"], **sampled, "seed": 4}
    again = _run(tmp_path / "again", "hf:new", a, {"generation": reseeded})
    comparison = compare_paired(hot, again, MARGIN)
    assert comparison.differences == []
    assert comparison.sampling[1]["samples"] == 8


def test_a_shared_variance_enters_the_t_tests_and_the_interval_weighted_by_prompts() -> None:
    """Two datasets of 2 and 6 prompts whose means carry a shared variance 0.04 and 0.01
    (two budgeted runs' fitted priors): the pooled mean over the 8 prompts carries
    (2^2 0.04 + 6^2 0.01) / 8^2 = 0.008125, added to the prompts' own variance of the mean;
    a constant difference is no longer known exactly."""
    a, b = np.array([0.1, 0.3]), np.array([0.2, 0.25, 0.05, 0.15, 0.3, 0.1])
    diffs = np.r_[a, b]
    test = paired_test([a, b], MARGIN, seed=3, shared=[0.04, 0.01])
    se = np.sqrt(diffs.var(ddof=1) / 8 + 0.008125)
    assert test.p_paired_t == pytest.approx(2 * stats.t.sf(diffs.mean() / se, 7), rel=1e-9)
    upper = stats.t.cdf((diffs.mean() - MARGIN) / se, 7)
    lower = stats.t.sf((diffs.mean() + MARGIN) / se, 7)
    assert test.p_tost == pytest.approx(max(upper, lower), rel=1e-9)
    plain = paired_test([a, b], MARGIN, seed=3)
    assert plain.ci_low is not None and plain.ci_high is not None
    assert test.ci_low is not None and test.ci_high is not None
    assert test.ci_low < plain.ci_low and test.ci_high > plain.ci_high
    constant = paired_test([np.full(5, 0.1)], MARGIN, seed=3, shared=[0.01])
    assert constant.p_paired_t == pytest.approx(2 * stats.t.sf(1.0, 4), rel=1e-9)
