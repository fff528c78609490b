"""Planning a budgeted design from a pilot: the planner's variance components and sampling
share by hand, and ``sago plan`` on a small deltas.parquet written here (no model)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from sago_cli.main import main
from sago_core.artifacts.rows import from_rows
from sago_core.artifacts.schemas import DELTAS, VARIANCE_COMPONENTS
from sago_core.budget.design import Grid, index_grid
from sago_core.budget.planner import (
    Components,
    at_samples,
    no_event_share,
    predicted_estimate,
    predicted_half_width,
    sample_shares,
    variance_components,
)
from sago_core.vocabulary import POOLED

STRENGTHS = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0)
KINDS = [("noise", "spacing", s, "prefix") for s in STRENGTHS] + [
    ("register", "politeness", s, "prefix") for s in STRENGTHS
]
POOLED_ROW = {"model": "m", "dataset": POOLED}


def test_variance_components_by_hand() -> None:
    """One stratum, prompt a: d = 0.6, 0.8 -> MS 0.5, s 0.707107, z = d^2 / 2s = 0.254558,
    0.452548 (SS 0.0196); prompt b: d = 0, 0.4 -> MS 0.08, s 0.282843, z = 0, 0.282843
    (SS 0.04). within = (0.0196 + 0.04) / 2 dof = 0.0298; between = var(0.707107, 0.282843)
    = 0.09; SGS 0.494975."""
    kinds = [("noise", "spacing", 1.0, "prefix"), ("noise", "spacing", 5.0, "prefix")]
    grid = Grid(("d",) * 4, ("a", "a", "b", "b"), tuple(kinds * 2))
    (parts,) = variance_components(index_grid(grid, "position"), np.array([0.6, 0.8, 0.0, 0.4]))
    assert parts.within == pytest.approx(0.0298, abs=1e-6)
    assert parts.between == pytest.approx(0.09, abs=1e-6)
    assert parts.sgs == pytest.approx(0.494975, abs=1e-6)
    assert (parts.prompts, parts.variants) == (2, 2)


def test_predicted_width_with_prompts_sampled_by_hand() -> None:
    """Cochran 1977 theorem 10.1, n = 5 of N = 10 prompts, m = 5 of V = 20 variants,
    between 0.04, within 0.09: (1 - 5/10) 0.04 / 5 + 0.09 (1/5 - 1/20) / 5 = 0.004 + 0.0027
    = 0.0067, half-width t(4) x 0.0818535 = 2.776445 x 0.0818535 = 0.227262 (the second
    stage over n, not N: each sampled prompt's own error is averaged over the n sampled).
    A second dataset of 5 prompts, all sampled: 0.09 (1/5 - 1/20) / 5 = 0.0027. Pooled:
    (0.0067 + 0.0027) / 4 = 0.00235 (sd 0.0484768), Satterthwaite's degrees of freedom
    0.0094^2 / (0.0067^2 / 4 + 0.0027^2 / 4) = 6.773476; over 3 rounds the last look's
    interval is at 1 - 2 (0.025 - 2 x 0.0013499) = 0.955400 (two interim looks at z = 3):
    t(6.773476) at 0.977700 = 2.459824, half-width 0.119244."""
    parts = [Components(between=0.04, within=0.09, prompts=10, variants=20, sgs=0.5)]
    assert predicted_half_width(parts, 5, 5, "grid") == pytest.approx(0.227262, abs=1e-5)
    two = [*parts, Components(between=0.04, within=0.09, prompts=5, variants=20, sgs=0.5)]
    assert predicted_half_width(two, 5, 5, "grid", rounds=3) == pytest.approx(0.119244, abs=1e-5)


def test_no_event_share_by_hand() -> None:
    """m = 3 cells of a prompt with 2 events in 10: (8/10)(7/9)(6/8) = 0.466667; 1 in 4:
    (3/4)(2/3)(1/2) = 0.25; a prompt with no event is left out: mean 0.358333."""
    measured, nonzero = np.array([10.0, 10.0, 4.0]), np.array([2.0, 0.0, 1.0])
    assert no_event_share(measured, nonzero, 3) == pytest.approx(0.358333, abs=1e-6)
    assert no_event_share(measured, nonzero, 9) == pytest.approx(0.0)  # 9 of 10 hold an event


def test_sample_share_and_its_split_by_hand() -> None:
    """s2_variant 0.01, s2_sample 0.08 at K0 = 4: q = 0.02 / 0.03 = 2/3. within 0.3 splits
    into the variants' 0.1 and the sampling part 0.2 x K0 / K: 0.1 at K = 8, 0.4 at K = 2.
    At K = 8, n = N = 8, m = 10 of V = 80: [0.1 (1/10 - 1/80) + 0.1 / 10] / 8 = 0.00234375,
    half-width t(7) x 0.0484123 = 2.364624 x 0.0484123 = 0.114477."""
    table = from_rows(
        [
            {**POOLED_ROW, "axis": "bleu", "s2_variant": 0.01, "s2_sample": 0.08},
            {**POOLED_ROW, "axis": "prob", "missing_reason": "teacher-forced"},
        ],
        VARIANCE_COMPONENTS,
    )
    shares, reasons = sample_shares(table, "m", ("bleu", "prob", "act"), 4)
    assert shares == {"bleu": pytest.approx(2 / 3)}
    assert reasons == {"prob": "teacher-forced", "act": "no row in variance_components.parquet"}
    parts = [Components(between=0.1, within=0.3, prompts=8, variants=80, sgs=0.5)]
    (at8,) = at_samples(parts, shares["bleu"], 4, 8)
    assert (at8.within, at8.sample) == (pytest.approx(0.1), pytest.approx(0.1))
    assert at_samples(parts, shares["bleu"], 4, 2)[0].sample == pytest.approx(0.4)
    assert at_samples(parts, None, 4, 8) == parts
    assert predicted_half_width([at8], 8, 10) == pytest.approx(0.114477, abs=1e-5)
    _, once = sample_shares(None, "m", ("bleu",), 1)
    assert "K = 1" in once["bleu"]


def write_run(
    folder: Path,
    models: tuple[str, ...] = ("m",),
    samples: int = 1,
    sparse: bool = False,
    prompts: int = 4,
    kinds: list[tuple[str, str, float, str]] = KINDS,
) -> Path:
    """2 datasets x 4 prompts x 12 variants (two strata of 6 strengths), axes bleu and mr:
    each prompt's deltas scale with a prompt effect (1, 2, 3, 4), so prompts differ far more
    than a prompt's variants do. ``sparse``: mr is 1 on one variant of each prompt, else 0."""
    rng = np.random.default_rng(3)
    rows = []
    for model in models:
        for dataset in ("d1", "d2"):
            for i in range(prompts):
                for family, subtype, strength, position in kinds:
                    for axis in ("bleu", "mr"):
                        value = -0.1 * (i + 1) * (1 + 0.2 * rng.random())
                        if sparse and axis == "mr":
                            value = float(family == "noise" and strength == 6.0)
                        rows.append(
                            {
                                "model": model,
                                "dataset": dataset,
                                "prompt_id": f"p{i}",
                                "variant_id": f"{family}-{strength}",
                                "family": family,
                                "subtype": subtype,
                                "strength": strength,
                                "position": position,
                                "axis": axis,
                                "delta": value,
                                "delta_norm": value,
                            }
                        )
    folder.mkdir(parents=True, exist_ok=True)
    from_rows(rows, DELTAS).write_parquet(folder / "deltas.parquet")
    generation = {"samples": samples, "temperature": 0.7} if samples > 1 else {}
    (folder / "run_config.json").write_text(json.dumps({"generation": generation}))
    return folder


def test_plan_prints_the_best_design(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """50% of 96 variant cells = 48, plus 8 prompts' base and replay (16): 64 generations.
    All 4 prompts: m = 64 / (4 x 2) - 2 = 6 (64 generations); 3 prompts would take 8
    variants each but add (1 - 3/4) between / 3, far above the 2 variants' within term here.
    6 variants per prompt afford the finest strata (two strata, two cells each)."""
    run = write_run(tmp_path / "run")
    assert main(["design", str(run), "--budget", "0.5"]) == 0
    out = capsys.readouterr().out
    assert "Budget: 64 generations (50% of the 96 variant cells: 48" in out
    assert "Best design: 4 prompts per dataset x 6 variants per prompt x K 1 = 64" in out
    assert "strata position" in out
    assert "full run: 112 generations" in out  # 8 prompts x (12 + 2)
    assert "sample-within-variant: one answer per prompt text (K = 1)" in out
    # the same budget as a number of generations
    assert main(["design", str(run), "--budget", "64", "--top", "2"]) == 0
    again = capsys.readouterr().out
    assert "Best design: 4 prompts per dataset x 6 variants per prompt x K 1 = 64" in again


def test_plan_takes_family_strata_only_where_a_run_would(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Noise in two subtypes (spacing, casing) and register: 3 strata by subtype, 2 by
    family, so a round takes 6 variants per prompt by subtype and 4 by family. At 96
    generations, 7 or 8 prompts afford 4 variants (96 / 16 - 2: family strata), 6 prompts 6
    (subtype): a run takes the subtypes over fewer prompts, at least 4, and so does the
    plan, though family strata over all 8 predict the narrower interval. At 56, 4 prompts
    afford 5 variants (family) and only 2 or 3 prompts afford the subtypes: family strata."""
    casing = [("noise", "casing", s, "prefix") for s in STRENGTHS]
    run = write_run(tmp_path / "run", prompts=8, kinds=[*KINDS, *casing])
    assert main(["design", str(run), "--budget", "96", "--top", "10"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    designs = {(r[0], r[4]) for r in rows if len(r) > 6 and r[0].isdigit()}
    assert designs == {(str(n), "position") for n in range(4, 7)}
    assert main(["design", str(run), "--budget", "56", "--top", "10"]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines()]
    assert {(r[0], r[4]) for r in rows if len(r) > 6 and r[0].isdigit()} == {("4", "family")}


def test_plan_with_a_baseline_predicts_what_it_leaves(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run as its own baseline leaves no within-prompt variance: with every prompt
    sampled the predicted half-width is 0; a baseline of other cells is refused."""
    run = write_run(tmp_path / "run")
    assert main(["design", str(run), "--budget", "0.5", "--baseline", str(run)]) == 0
    out = capsys.readouterr().out
    assert f"Baseline {run}: the within-prompt variance is what it leaves" in out
    assert "predicted half-width: bleu 0, mr 0" in out
    other = tmp_path / "other"
    other.mkdir()
    import polars as pl

    pl.read_parquet(run / "deltas.parquet").filter(pl.col("dataset") == "d1").write_parquet(
        other / "deltas.parquet"
    )
    assert main(["design", str(run), "--budget", "0.5", "--baseline", str(other)]) == 2
    assert "--baseline: not a full run of the pilot's cells" in capsys.readouterr().err


def test_plan_reads_the_sample_component_at_k_above_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path / "run", samples=4)
    table = from_rows(
        [{"model": "m", "dataset": POOLED, "axis": "bleu", "s2_variant": 0.01, "s2_sample": 0.08}],
        VARIANCE_COMPONENTS,
    )
    table.write_parquet(run / "variance_components.parquet")
    assert main(["design", str(run), "--budget", "0.5", "--samples", "4", "--top", "40"]) == 0
    out = capsys.readouterr().out
    assert "K 4 at T 0.7" in out
    assert "67% of the within-prompt variance at K 4" in out
    assert "not estimated: no row in variance_components.parquet" in out  # mr
    # 50% x 96 cells x K 4 + 16 x 4 = 256 generations; K 1 to 4 are all planned
    ks = {line.split()[2] for line in out.splitlines() if line[:9].strip().isdigit()}
    assert ks == {"1", "2", "3", "4"}


def test_plan_keeps_designs_with_few_event_free_prompts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """mr holds one event in a prompt's 12 variants: m sampled cells miss it with chance
    1 - m/12. 8 prompts per dataset at 128 generations: 8 prompts x 6 (0.5), 7 x 7 (0.417),
    6 x 8 (0.333), 5 x 10 (0.167), 4 x 12 (0); fewer than 4 a run does not sample. A limit
    of 0.4 drops 8 x 6 and 7 x 7; 0.1 leaves 4 x 12 = 4 x 2 x 14 = 112 generations."""
    run = write_run(tmp_path / "run", sparse=True, prompts=8)
    assert main(["design", str(run), "--budget", "128", "--max-no-event", "0.4"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    designs = {(r[0], r[1], r[6]) for r in rows if len(r) > 6 and r[0].isdigit()}
    assert designs == {("6", "8", "33%"), ("5", "10", "17%"), ("4", "12", "0%")}
    assert main(["design", str(run), "--budget", "128", "--max-no-event", "0.1"]) == 0
    out = capsys.readouterr().out
    assert "Best design: 4 prompts per dataset x 12 variants per prompt x K 1 = 112" in out


@pytest.mark.parametrize(
    ("setup", "argv", "message"),
    [
        ("none", ["--budget", "0.5"], "deltas.parquet: does not exist"),
        ("two", ["--budget", "0.5"], "column 'model': deltas hold models ['a', 'b']: name one"),
        ("one", ["--budget", "0.5", "--model", "z"], "deltas hold no rows of model 'z'"),
        ("one", ["--budget", "0.5", "--target", "bleu=0.1,xx=1"], "--target: unknown axis 'xx'"),
        ("one", ["--budget", "0.5", "--target", "bleu=-1"], "positive half-width"),
        ("one", ["--budget", "0"], "argument --budget: '0': a budget must be above 0"),
        ("one", ["--budget", "1.5"], "above 1 a budget is a whole number of generations"),
        ("one", ["--budget", "20"], "--budget: 20 generations afford no design"),
        ("one", ["--budget", "0.5", "--samples", "3"], "--samples: the run's sample-within"),
        ("one", ["--budget", "0.5", "--pool", "1"], "--pool: 1 prompts per dataset"),
        ("one", ["--budget", "0.5", "--max-no-event", "1.5"], "--max-no-event: 1.5 is not"),
        ("sparse", ["--budget", "40", "--max-no-event", "0"], "--max-no-event: no design"),
        ("bad", ["--budget", "0.5"], "column 'axis': is not a run's deltas table"),
    ],
)
def test_plan_refuses_bad_input_in_one_line(
    setup: str,
    argv: list[str],
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = tmp_path / "run"
    if setup == "none":
        run.mkdir()
    elif setup == "two":
        write_run(run, models=("a", "b"))
    elif setup == "sparse":
        write_run(run, sparse=True)
    elif setup == "bad":
        write_run(run)
        pl.read_parquet(run / "deltas.parquet").drop("axis").write_parquet(run / "deltas.parquet")
    else:
        write_run(run)
    try:
        code = main(["design", str(run), *argv])
    except SystemExit as exc:  # argparse refuses the argument itself
        code = exc.code  # type: ignore[assignment]
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert message in err
    assert len(err.splitlines()) == 1 or err.startswith("usage:")


def test_the_replay_prints_prediction_beside_realisation(tmp_path: Path) -> None:
    """The validation replay's table (bench/budget.py) on a tiny synthetic grid: one row per
    axis with the planner's predicted half-width, the realised one and their ratio."""
    from bench.budget import main as replay

    out = tmp_path / "table.md"
    argv = ["--prompts", "3", "--budgets", "0.4", "--replays", "2", "--null-replays", "2"]
    assert replay([*argv, "--markdown", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert lines[0].split("|")[-5:-1] == ["pred hw", "real hw", "1.96 rmse", "pred/real"]
    rows = [line.split("|") for line in lines[2:8]]
    assert [r[2] for r in rows] == ["act", "bleu", "bert", "prob", "ent", "mr"]
    for r in rows:
        pred, real, ratio = float(r[-5]), float(r[-4]), float(r[-2])
        assert ratio == pytest.approx(pred / real, abs=0.006)
    assert "|axis|spending|naive|full|" in lines


def test_the_prediction_is_the_second_stage_term_by_hand() -> None:
    # 2 prompts x 4 variants, both sampled (no first-stage term); at m = 2 the second stage
    # is 0.1 x (1/2 - 1/4) = 0.025 per prompt, over n = 2 prompts: 0.0125. A sparse axis
    # gets no floor on top: its 0-event prompts' roots are the estimator's posterior ones.
    parts = [Components(between=0.3, within=0.1, prompts=2, variants=4, sgs=0.2)]
    assert predicted_estimate(parts, 2, 2).variance == pytest.approx(0.0125)
    # every cell asked: no variance left
    assert predicted_estimate(parts, 2, 4).variance == pytest.approx(0.0)
