"""``sago design``: of the budgeted designs a run would take, the one with the narrowest
predicted interval, planned from a finished run's variance components (its
``deltas.parquet``; at K > 1 also its ``variance_components.parquet``). Reads artifacts
only: no model, no generation."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from sago_cli.options import add_budget, add_model, add_run
from sago_cli.plan_pilot import read_pilot
from sago_cli.plan_report import plan_lines
from sago_core.budget.planner import DEFAULT_ROUNDS


def target_value(text: str) -> dict[str, float]:
    found = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        axis, sep, number = part.partition("=")
        try:
            width = float(number) if sep else float("nan")
        except ValueError:
            width = float("nan")
        if not width > 0 or width == float("inf"):
            raise argparse.ArgumentTypeError(
                f"{part!r}: give AXIS=HALF_WIDTH with a positive half-width"
            )
        found[axis.strip()] = width
    return found


def add_parser(commands: Any) -> None:
    plan = commands.add_parser(
        "design",
        help="choose a budgeted design from a finished run: prompts per dataset x variants per "
        "prompt x K, of those a run would take, with the narrowest predicted interval (no model)",
    )
    add_run(plan, "a finished run (the pilot): its folder or store URL")
    add_budget(plan, "the budget to spend", required=True)
    add_model(plan, "the run's model whose deltas plan it (when the run holds several)")
    plan.add_argument(
        "--target",
        type=target_value,
        metavar="AXIS=HALF_WIDTH,...",
        help="rank designs by these half-widths, e.g. bleu=0.02,mr=0.05 (default: every "
        "axis' half-width over its SGS)",
    )
    plan.add_argument(
        "--pool",
        type=int,
        metavar="N",
        help="prompts available per dataset: with more than the run's, the interval is for the "
        "mean over that pool's prompts, not the run's grid (default: the run's prompts)",
    )
    plan.add_argument(
        "--samples",
        type=int,
        metavar="K",
        help="the most answers per prompt text (K) to consider; needs the run's "
        "sample-within-variant component (default: the run's K)",
    )
    plan.add_argument(
        "--max-no-event",
        type=float,
        metavar="SHARE",
        help="only designs where, on every axis, at most this share of the sampled prompts "
        "is expected to show no non-zero delta though the run's do (column 0-event; such a "
        "prompt's root is 0 and biases the estimate low); default: no limit",
    )
    plan.add_argument(
        "--baseline",
        type=Path,
        metavar="RUN",
        help="the last release's full run of the same cells: plan with it as the control "
        "variate (budget.baseline)",
    )
    plan.add_argument("--top", type=int, default=5, help="designs listed")
    plan.add_argument(
        "--rounds",
        type=int,
        default=DEFAULT_ROUNDS,
        help=f"rounds the run would take (budget.rounds; default {DEFAULT_ROUNDS}): the "
        "first round's two cells per stratum and the later rounds' allocation shape the "
        "predicted half-widths",
    )


def command(args: argparse.Namespace) -> int:
    print("\n".join(plan_lines(read_pilot(args.run, args.model, args.baseline), args)))
    return 0
