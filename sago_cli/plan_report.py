"""What ``sago design`` prints: the pilot, the budget in generations, the variance components
and the best designs with their predicted half-widths (sago_core/budget/planner.py)."""

from __future__ import annotations

import argparse

import numpy as np

from sago_cli.plan_pilot import Budget, PilotRun
from sago_core.budget.design import LEVELS
from sago_core.budget.planner import (
    PROMPT_OVERHEAD,
    Pilot,
    PlannedDesign,
    pilot_from_grid,
    plan,
    sample_shares,
)
from sago_core.budget.schedule import budget_cells
from sago_core.errors import ConfigError


def budget_generations(budget: Budget, pilot: Pilot, cells: int) -> tuple[int, str]:
    """Generations the budget allows, and how they were counted."""
    if budget.generations is not None:
        return budget.generations, f"{budget.generations:,} generations"
    assert budget.fraction is not None
    taken = budget_cells(cells, budget.fraction, None)
    first = next(iter(pilot.components[LEVELS[0]].values()))
    overhead = sum(c.prompts for c in first) * PROMPT_OVERHEAD
    total = (taken + overhead) * pilot.samples
    return total, (
        f"{total:,} generations ({budget.fraction * 100:g}% of the {cells:,} variant cells: "
        f"{taken:,}, and each prompt's base and replay: {overhead:,}"
        + (f", x K {pilot.samples}" if pilot.samples > 1 else "")
        + "; as sago run --budget)"
    )


def _checked(args: argparse.Namespace, pilot: Pilot, run: PilotRun) -> None:
    axes = run.grid.axes
    for axis in args.target or {}:
        if axis not in axes:
            raise ConfigError(
                f"--target: unknown axis {axis!r} (the run's axes: {', '.join(axes)})"
            )
    if args.pool is not None and args.pool < 2:
        raise ConfigError(f"--pool: {args.pool} prompts per dataset; a t-test needs at least 2")
    if args.samples is not None and args.samples < 1:
        raise ConfigError(f"--samples: {args.samples}; K is at least 1")
    if args.max_no_event is not None and not 0 <= args.max_no_event <= 1:
        raise ConfigError(f"--max-no-event: {args.max_no_event:g} is not a share in [0, 1]")
    if args.top < 1:
        raise ConfigError(f"--top: {args.top}; list at least 1 design")
    if args.rounds < 1:
        raise ConfigError(f"--rounds: {args.rounds}; a run takes at least 1 round")


def plan_lines(run: PilotRun, args: argparse.Namespace) -> list[str]:
    axes = run.grid.axes
    shares, reasons = sample_shares(run.variance_components, run.model, axes, run.samples)
    pilot = pilot_from_grid(run.grid, run.samples, shares, run.baseline)
    _checked(args, pilot, run)
    if args.samples is not None and args.samples != run.samples and not shares:
        why = "; ".join(sorted(set(reasons.values())))
        raise ConfigError(
            f"--samples: the run's sample-within-variant component is not estimated ({why}), "
            f"so no K but the run's ({run.samples}) can be planned"
        )
    first = next(iter(pilot.components[LEVELS[0]].values()))
    have = min(c.prompts for c in first)
    population = args.pool is not None and args.pool > have
    generations, counted = budget_generations(args.budget, pilot, run.grid.grid.cells)
    samples = range(1, args.samples + 1) if args.samples else (run.samples,)
    designs = plan(
        pilot,
        generations,
        target=args.target,
        scope="population" if population else "grid",
        max_prompts=args.pool,
        samples=samples,
        top=args.top,
        max_no_event=args.max_no_event,
        rounds=args.rounds,
    )
    if not designs and args.max_no_event is not None:
        raise ConfigError(
            f"--max-no-event: no design within {generations:,} generations keeps every axis' "
            f"share of event-free prompts at or below {args.max_no_event:g}"
        )
    if not designs:
        smallest = 2 * len(first) * (pilot.minimum[LEVELS[-1]] + PROMPT_OVERHEAD) * min(samples)
        raise ConfigError(
            f"--budget: {generations:,} generations afford no design of this run; the smallest "
            f"(2 prompts per dataset, two variants per stratum) takes {smallest:,}"
        )
    best = designs[0]
    full = pilot.generations()
    lines = [
        f"Plan from {run.folder} (model {run.model}): {len(first)} datasets x {have} prompts x "
        f"{pilot.variants} variants per prompt, K {run.samples}"
        + (f" at T {run.temperature:g}" if run.temperature > 0 else " (greedy)")
        + f"; the full run: {full:,} generations",
        f"Budget: {counted}",
        *(
            [f"Baseline {args.baseline}: the within-prompt variance is what it leaves"]
            if run.baseline is not None
            else []
        ),
        (
            f"Predicted 95% half-widths: for the mean over a pool of {args.pool} prompts per "
            "dataset (prompts drawn from it), pooled over datasets"
            if population
            else f"Predicted 95% half-widths: for the full grid's pooled SGS (this run's {have} "
            "prompts per dataset)"
        )
        + (
            "; K varies, so for its expected value over sampling" if args.samples and shares else ""
        ),
        "",
        f"Variance components (mean over datasets, at the best design's strata: {best.level}):",
        f"  {'axis':<6} {'SGS':>9} {'between':>10} {'within':>10}  sample-within-variant",
    ]
    assert best.level is not None
    common = set(reasons.values()) if len(set(reasons.values())) == 1 and not shares else None
    for axis in axes:
        parts = pilot.components[best.level][axis]
        sample = (
            f"{shares[axis]:.0%} of the within-prompt variance at K {run.samples}"
            if axis in shares
            else "not estimated" + ("" if common else f": {reasons[axis]}")
        )
        lines.append(
            f"  {axis:<6} {np.mean([c.sgs for c in parts]):>9.4g} "
            f"{np.mean([c.between for c in parts]):>10.3g} "
            f"{np.mean([c.within for c in parts]):>10.3g}  {sample}"
        )
    if common:
        lines.append(f"  (sample-within-variant: {next(iter(common))})")
    rank = "its target" if args.target else "its SGS"
    lines += [
        "",
        f"Best design: {best.prompts} prompts per dataset x {best.variants} variants per prompt "
        f"x K {best.samples} = {best.generations:,} generations ({best.generations / full:.0%} "
        f"of the full run), strata {best.level}",
        "  predicted half-width: " + ", ".join(f"{a} {best.half_widths[a]:.4g}" for a in axes),
        *_no_event_lines(best),
        "",
        f"Designs ranked by the worst axis' predicted half-width over {rank} (first = best):",
        _header(axes),
        *(_row(d, axes) for d in designs),
    ]
    return lines


NO_EVENT_NOTE = 0.05  # a share of event-free prompts worth a warning


def _no_event_lines(design: PlannedDesign) -> list[str]:
    risky = {a: x for a, x in (design.no_event or {}).items() if x >= NO_EVENT_NOTE}
    if not risky:
        return []
    listed = ", ".join(f"{a} {x:.0%}" for a, x in risky.items())
    return [
        f"  prompts whose sampled cells would all be 0 though the run's are not: {listed}; "
        "such a prompt's root leans on the other prompts' event rate, not on its own cells: "
        "fewer prompts with more variants each (see 0-event) lower it"
    ]


def _header(axes: tuple[str, ...]) -> str:
    head = f"  {'prompts':>7} {'variants':>8} {'K':>3} {'generations':>11} {'strata':<8}"
    head += f" {'worst':>6} {'0-event':>7}"  # the ranking; the largest no-event share
    return head + "".join(f" {a:>8}" for a in axes)


def _row(design: PlannedDesign, axes: tuple[str, ...]) -> str:
    return (
        f"  {design.prompts:>7} {design.variants:>8} {design.samples:>3} "
        f"{design.generations:>11,} {design.level or '':<8} {design.score:>6.3f} "
        f"{max((design.no_event or {}).values(), default=0.0):>7.0%}"
        + "".join(f" {design.half_widths[a]:>8.4g}" for a in axes)
    )
