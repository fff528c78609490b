"""A budgeted run's pieces outside the flow: the grid read from the kept variants, a
round's inputs, the values read back from deltas, the design-based scores and the budget
line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from sago_core.budget.record import budget_line
from sago_core.budget.run_cells import cell_values, round_inputs_of, run_cells
from sago_core.report.card.budget import budget_blocks, budget_card
from sago_core.report.summary_md import render_summary
from sago_core.scoring.budgeted_scores import design_scores
from sago_core.scoring.summary import summarize, with_budget_verdicts
from sago_core.vocabulary import POOLED, REPLAY_FAMILY


def variants_frame() -> pl.DataFrame:
    rows = [
        # dataset, prompt, variant, family, subtype, strength, position, kept
        ("d", "p1", "v1", "noise", "spacing", 5.0, "global", True),
        ("d", "p1", "v2", "noise", "spacing", 5.0, "global", True),  # the same kind twice
        ("d", "p1", "v3", "register", "polite", 4.0, "prefix", False),  # not kept
        ("d", "p1", "r", REPLAY_FAMILY, REPLAY_FAMILY, 0.0, "global", True),
        ("d", "p2", "v1", "noise", "spacing", 5.0, "global", True),
        ("d", "p2", "r", REPLAY_FAMILY, REPLAY_FAMILY, 0.0, "global", True),
    ]
    names = ["dataset", "prompt_id", "variant_id", "family", "subtype", "strength", "position"]
    frame = pl.DataFrame([r[:7] for r in rows], schema=names, orient="row")
    return frame.with_columns(
        pl.Series("kept", [r[7] for r in rows]), pl.Series("text", [f"t{i}" for i in range(6)])
    )


def test_the_grid_is_the_kept_variants_without_the_replay_and_a_twice_held_kind_apart() -> None:
    cells = run_cells(variants_frame())
    assert cells.ids == (("d", "p1", "v1"), ("d", "p1", "v2"), ("d", "p2", "v1"))
    assert cells.grid.kind == (
        ("noise", "spacing", 5.0, "global"),
        ("noise", "spacing#2", 5.0, "global"),
        ("noise", "spacing", 5.0, "global"),
    )


def test_a_round_holds_the_sampled_prompts_their_replays_and_the_cells_asked() -> None:
    variants = variants_frame()
    prompts = pl.DataFrame({"dataset": ["d", "d"], "prompt_id": ["p1", "p2"], "prompt": ["a", "b"]})
    asked = pl.DataFrame({"dataset": ["d"], "prompt_id": ["p1"], "variant_id": ["v2"]})
    round_prompts, round_variants = round_inputs_of(prompts, variants, asked, {("d", "p1")})
    assert round_prompts["prompt_id"].to_list() == ["p1"]
    assert round_variants.select("prompt_id", "variant_id").rows() == [("p1", "r"), ("p1", "v2")]


def test_values_are_read_back_per_model_and_axis_missing_as_nan() -> None:
    cells = run_cells(variants_frame())
    deltas = pl.DataFrame(
        {
            "model": ["m", "m", "m", "n"],
            "dataset": ["d"] * 4,
            "prompt_id": ["p1", "p2", "p1", "p1"],
            "variant_id": ["v1", "v1", "v2", "v1"],
            "axis": ["bleu", "bleu", "bleu", "bleu"],
            "delta_norm": [0.5, float("inf"), None, 0.25],
        }
    )
    mask = np.array([True, True, True])
    values = cell_values(deltas, cells, [("m", "bleu"), ("n", "bleu"), ("m", "act")], mask)
    expected = np.array([[0.5, 0.25, np.nan], [np.nan, np.nan, np.nan], [np.nan, np.nan, np.nan]])
    np.testing.assert_array_equal(values, expected)
    only_first = cell_values(deltas, cells, [("m", "bleu")], np.array([True, False, False]))
    np.testing.assert_array_equal(only_first, np.array([[0.5]]))


def test_scores_carry_the_design_estimate_and_keep_a_missing_score_missing() -> None:
    deltas = pl.DataFrame(
        {
            "model": ["m"] * 4,
            "dataset": ["d"] * 4,
            "prompt_id": ["p1", "p1", "p2", "p2"],
            "variant_id": ["v1", "v2", "v1", "r"],
            "family": ["noise", "noise", "noise", REPLAY_FAMILY],
            "axis": ["bleu", "bleu", "act", "act"],
            "delta_norm": [0.3, 0.4, None, 0.1],
            "missing_reason": [None, None, "no hidden states", None],
        }
    )
    design = pl.DataFrame(
        {
            "model": ["m", "m"],
            "dataset": ["d", "d"],
            "prompt_id": ["p1", "p2"],
            "axis": ["bleu", "act"],
            "s": [0.42, 0.9],
        }
    )
    scores = design_scores(deltas, design)
    bleu = scores.filter(pl.col("axis") == "bleu").row(0, named=True)
    act = scores.filter(pl.col("axis") == "act").row(0, named=True)
    assert bleu["s"] == 0.42 and bleu["n_variants"] == 2  # not the plain RMS 0.3536
    assert act["s"] is None and act["missing_reason"] == "no hidden states"
    assert act["floor"] == 0.1


BUDGET_RECORD = {
    "cells": 1604,
    "full_cells": 7968,
    "share": 1604 / 7968,
    "rounds_run": 3,
    "rounds_planned": 3,
    "stop_reason": "budget spent",
    "targets_unmet": [],
}


def test_the_budget_line_says_cells_share_round_and_why_it_stopped() -> None:
    record = BUDGET_RECORD
    assert budget_line(record) == (
        "budgeted: 1,604 of 7,968 cells (20%), stopped after round 3 of 3: the budget was spent"
    )
    unmet = {**record, "targets_unmet": ["m :: bleu"], "rounds_run": 2}
    assert budget_line(unmet).endswith("round 2 of 3: target not met for m :: bleu")


def test_the_card_carries_the_budget_line_only_for_a_budgeted_run(tmp_path: Path) -> None:
    assert budget_card(tmp_path) == {}
    record = {
        "cells": 20,
        "full_cells": 100,
        "share": 0.2,
        "rounds_run": 1,
        "rounds_planned": 2,
        "stop_reason": "every target met or verdict decided",
        "targets_unmet": [],
    }
    (tmp_path / "budget.json").write_text(json.dumps(record))
    card = budget_card(tmp_path)
    assert card["budget"]["line"].startswith("budgeted: 20 of 100 cells (20%), stopped after")
    ((heading, _, _, notes),) = budget_blocks(card)
    assert heading == "Budgeted run" and notes[0].endswith("every target met or verdict decided.")


def test_budget_cells_hold_the_designs_probability_for_every_cell_of_a_sampled_prompt() -> None:
    """Half of each prompt's six kinds in one round: every cell of a sampled prompt has
    pi = 3/6 = 0.5, asked or not (a Horvitz-Thompson weight), and the asked cells'
    1/pi sum to the grid's cells."""
    from sago_core.budget.record import cells_frame
    from sago_core.budget.rounds import budgeted_design, column_name
    from sago_core.budget.sequential import run_budgeted
    from sago_core.config import BudgetSettings

    rows = [
        ("d", f"p{i}", f"v{s}", "noise", "spacing", float(s), "global", True)
        for i in range(3)
        for s in range(1, 7)
    ]
    names = ["dataset", "prompt_id", "variant_id", "family", "subtype", "strength", "position"]
    variants = pl.DataFrame([r[:7] for r in rows], schema=names, orient="row").with_columns(
        pl.lit(True).alias("kept")
    )
    cells = run_cells(variants)
    design = budgeted_design(cells, BudgetSettings(fraction=0.5, rounds=1), 0, ["m"])
    values = np.linspace(0.1, 1.8, len(cells.ids))[:, None].repeat(len(design.columns), 1)
    result = run_budgeted(
        design.design,
        design.schedule.totals,
        lambda m: values[m],
        [column_name(m, a) for m, a in design.columns],
    )
    frame = cells_frame(result, design)
    assert frame["asked"].sum() == 9
    assert frame["inclusion_probability"].to_list() == [0.5] * 18
    asked = frame.filter(pl.col("asked"))
    assert (1 / asked["inclusion_probability"]).sum() == 18


def test_a_budgeted_summary_shows_the_stopping_rules_verdicts() -> None:
    # every score far above 0.05: the summary's own t-test would mark every row ***; the
    # rule said "above" pooled (p 0.004), left d0 undecided (p 0.3) and ran no test on d1
    scores = pl.DataFrame(
        {
            "model": ["m"] * 6,
            "dataset": ["d0"] * 3 + ["d1"] * 3,
            "prompt_id": [f"p{i}" for i in range(6)],
            "axis": ["bleu"] * 6,
            "s": [0.50, 0.52, 0.51, 0.49, 0.53, 0.50],
        }
    )
    plain = summarize(scores)
    assert (plain["p_holm"] < 0.001).all()
    tests = [
        {"model": "m", "dataset": POOLED, "axis": "bleu", "eps": 0.05, "p_above": 0.004},
        {"model": "m", "dataset": POOLED, "axis": "bleu", "eps": 0.1, "p_above": 0.02},
        {"model": "m", "dataset": "d0", "axis": "bleu", "eps": 0.05, "p_above": 0.3},
    ]
    summary = with_budget_verdicts(plain, tests)
    rows = {r["dataset"]: r for r in summary.iter_rows(named=True)}
    assert rows[POOLED]["p_eps_0_05"] == rows[POOLED]["p_holm"] == 0.004
    assert rows[POOLED]["p_eps_0_10"] == 0.02 and rows[POOLED]["p_eps_0_01"] is None
    assert rows["d0"]["p_holm"] == rows["d0"]["p_reference"] == 0.3
    assert rows["d1"]["p_holm"] is None and rows["d1"]["p_eps_0_05"] is None
    text = render_summary(summary, budget=BUDGET_RECORD)
    assert "| bleu | 0.5100 | 0.5067 | 0.5083** |" in text  # d0 and d1 unmarked
    assert "marks: the budget's stopping rule's p" in text
    # the page's headline and method note say the same, never "Holm over every row"
    from dataclasses import fields, replace

    from sago_core.report.page.headline import Glance, headline_html
    from sago_core.report.page.results import method_note

    lists = ("unstable", "stable", "unmeasured")
    bare = Glance(**{f.name: [] if f.name in lists else None for f in fields(Glance)})
    bare = replace(bare, model="m", flips_at_k=False)
    assert "Holm over every row" in headline_html([bare])
    glance = headline_html([bare], budgeted=True)
    assert "stopping rule" in glance and "Holm" not in glance
    page = method_note(summary, budgeted=True)
    assert "stopping rule" in page and "over all rows" not in page
    assert "over all rows of the summary" in method_note(summary)
    # the design's estimate and interval, where budget_estimates.parquet holds one (with a
    # baseline it is not always the mean of the prompts' scores)
    estimates = pl.DataFrame(
        {"model": ["m"], "dataset": [POOLED], "axis": ["bleu"], "sgs": [0.6], "half_width": [0.05]}
    )
    designed = with_budget_verdicts(plain, tests, estimates)
    by = {r["dataset"]: r for r in designed.iter_rows(named=True)}
    assert (by[POOLED]["sgs"], by[POOLED]["ci_low"], by[POOLED]["ci_high"]) == pytest.approx(
        (0.6, 0.55, 0.65)
    )
    assert by["d0"]["sgs"] == rows["d0"]["sgs"] and by["d0"]["ci_low"] == rows["d0"]["ci_low"]
    # the noise-floor reference is not the rule's test: its p-values stay the summary's
    floor = summarize(scores.with_columns(pl.lit(0.1).alias("floor")), "floor")
    kept = with_budget_verdicts(floor, tests)
    assert kept["p_holm"].to_list() == floor["p_holm"].to_list()
