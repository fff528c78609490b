"""What a budgeted run leaves beside its usual artifacts (run folder): ``budget.json`` (the
rounds, the cells asked, why it stopped, the verdicts: ``tests`` holds every pooled and
per-dataset test of the stopping rule with its p-values), ``budget_cells.parquet`` (every
cell of the grid, the round that asked it and its inclusion probability: the design's, for
every cell of a sampled prompt, asked or not, at the counts of the round the run stopped
after; 0 for a prompt not sampled. The counts do not depend on the prompt's own values
(sequential.py), so these probabilities are valid Horvitz-Thompson weights; runs written
before held them for the asked cells only, 0 elsewhere),
``budget_prompts.parquet`` (the design-based per-prompt scores) and
``budget_estimates.parquet`` (each model, dataset and axis: the estimate of the full grid's
SGS with its design interval, and ``shared_variance``, the part of its variance every prompt
of the dataset shares: the fitted prior's or rho's error, which a paired test over prompts
does not see).

budget.json's ``variance``: per model and axis, from the asked cells, the planner's
between-prompt component (``prompt``) and its within-prompt one split by the share q of it
that sampling makes at the run's K (planner.sample_shares, at_samples): ``variant`` +
``sample`` = within, each the datasets' mean; ``sample`` null with its reason where q is not
estimated (K = 1, Prob, Ent, Act)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from sago_core.artifacts.layout import (
    BUDGET_CELLS_FILE,
    BUDGET_ESTIMATES_FILE,
    BUDGET_FILE,
    BUDGET_PROMPTS_FILE,
)
from sago_core.artifacts.schemas import BUDGET_CELLS, BUDGET_ESTIMATES, BUDGET_PROMPTS
from sago_core.artifacts.store import write_json, write_parquet
from sago_core.budget.baseline import correlation
from sago_core.budget.design import inclusion_probability, select_cells
from sago_core.budget.dry_run import PER_PROMPT
from sago_core.budget.estimate import dataset_estimates, pooled_estimate
from sago_core.budget.planner import at_samples, sample_shares, variance_components
from sago_core.budget.rounds import BudgetedDesign, column_name, split_column
from sago_core.budget.sequential import BudgetResult
from sago_core.vocabulary import POOLED


def _number(value: float | None) -> float | None:
    return None if value is None or not np.isfinite(value) else float(value)


def cells_frame(result: BudgetResult, design: BudgetedDesign) -> pl.DataFrame:
    first = np.zeros(len(design.cells.ids), dtype=np.int32)
    for record in reversed(result.rounds):
        first[select_cells(design.design, record.counts)] = record.round
    pi = inclusion_probability(design.design, result.rounds[-1].counts)
    return design.cells.frame().with_columns(
        pl.Series("asked", result.observed),
        pl.Series("round", np.where(result.observed, first, 0)).replace(0, None),
        pl.Series("inclusion_probability", pi),
    )


def prompts_frame(result: BudgetResult, design: BudgetedDesign) -> pl.DataFrame:
    layout = design.design.layout
    rows = []
    for model, axis in design.columns:
        estimates = result.prompts.get(column_name(model, axis))
        if estimates is None:
            continue
        for i, (dataset, prompt) in enumerate(layout.prompts):
            if not np.isfinite(estimates.ms[i]):
                continue
            rows.append(
                {
                    "model": model,
                    "dataset": dataset,
                    "prompt_id": prompt,
                    "axis": axis,
                    "s": _number(estimates.s[i]),
                    "s_var": _number(estimates.s_var[i]),
                    "root": _number(estimates.root[i]),
                    "ms": _number(estimates.ms[i]),
                    "ms_var": _number(estimates.ms_var[i]),
                }
            )
    return pl.DataFrame(rows, schema=BUDGET_PROMPTS)


def estimates_frame(result: BudgetResult, design: BudgetedDesign) -> pl.DataFrame:
    layout = design.design.layout
    rows = []
    for model, axis in design.columns:
        name = column_name(model, axis)
        estimates = result.prompts.get(name)
        if estimates is None:
            continue
        target = design.target.get(name)
        per_dataset = dataset_estimates(layout, estimates, design.design.sampled_prompts)
        shared = [float(v) for v in estimates.prior_var]
        held = [(j, e) for j, e in enumerate(per_dataset) if e is not None]
        for j, estimate in held:
            rows.append((model, layout.datasets[j], axis, estimate, target, shared[j]))
        pooled = pooled_estimate(per_dataset)
        if pooled is not None:
            pooled_shared = sum(shared[j] for j, _ in held) / len(held) ** 2
            rows.append((model, POOLED, axis, pooled, target, pooled_shared))
    return pl.DataFrame(
        [
            {
                "model": m,
                "dataset": d,
                "axis": a,
                "sgs": e.value,
                "variance": e.variance,
                "half_width": e.half_width(result.level),
                "prompts": e.prompts,
                "target": t,
                "shared_variance": v,
            }
            for m, d, a, e, t, v in rows
        ],
        schema=BUDGET_ESTIMATES,
    )


def baseline_summary(
    result: BudgetResult, design: BudgetedDesign, baseline: np.ndarray | None
) -> dict[str, Any] | None:
    """The baseline run and, per column, the correlation its cells showed with the run's
    (of the linearised cells, every dataset pooled), each dataset's lambda and the estimate
    the column took (baseline.py: over the baseline's prompts, or the control variate)."""
    if baseline is None or result.values is None:
        return None
    layout = design.design.layout
    controls = {
        column_name(m, a): correlation(layout, result.values[:, c], baseline[:, c], result.observed)
        for c, (m, a) in enumerate(design.columns)
    }
    return {
        "run": design.settings.baseline,
        "correlation": {name: _number(k.rho) for name, k in controls.items()},
        "lambda": {
            name: dict(zip(layout.datasets, k.lam.tolist(), strict=True))
            for name, k in controls.items()
        },
        "estimate": {
            name: "over the baseline's prompts" if taken.datasets is not None else "control variate"
            for name, taken in result.prompts.items()
        },
    }


def variance_rows(
    result: BudgetResult, design: BudgetedDesign, components: pl.DataFrame | None
) -> list[dict[str, Any]]:
    """budget.json's variance table (module docstring); ``components``: the run's
    variance_components.parquet (None at K = 1)."""
    if result.values is None:
        return []
    rows = []
    k = design.samples
    for c, (model, axis) in enumerate(design.columns):
        shares, reasons = sample_shares(components, model, [axis], k)
        parts = variance_components(design.design.layout, result.values[:, c])
        split = at_samples(parts, shares.get(axis), k, k)
        rows.append(
            {
                "model": model,
                "axis": axis,
                "prompt": _number(float(np.mean([p.between for p in split]))),
                "variant": _number(float(np.mean([p.within for p in split]))),
                "sample": _number(float(np.mean([p.sample for p in split])))
                if axis in shares
                else None,
                "sample_missing_reason": reasons.get(axis),
            }
        )
    return rows


def budget_summary(
    result: BudgetResult, design: BudgetedDesign, baseline: np.ndarray | None = None
) -> dict[str, Any]:
    """budget.json: the run's budget line and what each round did."""
    schedule = design.schedule
    layout = design.design.layout
    unmet = [
        name
        for name, state in result.axes.items()
        if name in design.target and state.estimate is not None and not state.met
    ]
    return {
        "cells": result.cells,
        "budget_cells": schedule.budget,
        "full_cells": schedule.full,
        "share": result.cells / schedule.full if schedule.full else None,
        "rounds_run": len(result.rounds),
        "rounds_planned": schedule.rounds,
        "stop_reason": result.stop_reason,
        "targets_unmet": unmet,
        "target": dict(design.settings.target),
        "level": layout.level,
        "prompts_sampled": int(sum(schedule.prompts)),
        "samples": design.samples,  # a cell costs K generations
        "generations": (result.cells + PER_PROMPT * int(sum(schedule.prompts))) * design.samples,
        "prompts": len(layout.prompts),
        "seed": design.design.seed,
        "alpha_spending": "Haybittle-Peto (interim looks at one-sided z = 3)",
        "rounds": [
            {
                "round": r.round,
                "cells": r.cells,
                "half_widths": {k: _number(v) for k, v in r.half_widths.items()},
                "estimates": {k: _number(v) for k, v in r.estimates.items()},
            }
            for r in result.rounds
        ],
        "verdicts": {
            name: {f"{eps:g}": v.decision for eps, v in state.verdicts.items()}
            for name, state in result.axes.items()
        },
        "tests": verdict_rows(result, design),
        "baseline": baseline_summary(result, design, baseline),
    }


def verdict_rows(result: BudgetResult, design: BudgetedDesign) -> list[dict[str, Any]]:
    """Every test the stopping rule decided or left open, pooled and per dataset: model,
    dataset, axis, eps, decision, look and the rule's p-value of each direction
    (sequential.Verdict): the verdicts the summary and the report show."""
    datasets = design.design.layout.datasets
    rows = []
    for model, axis in design.columns:
        state = result.axes.get(column_name(model, axis))
        if state is None:
            continue
        levels = [(POOLED, state.verdicts)]
        levels += [(datasets[j], tests) for j, tests in sorted(state.by_dataset.items())]
        for dataset, tests in levels:
            for eps, v in tests.items():
                rows.append(
                    {
                        "model": model,
                        "dataset": dataset,
                        "axis": axis,
                        "eps": float(eps),
                        "decision": v.decision,
                        "look": v.look,
                        "p_above": _number(v.p_above),
                        "p_below": _number(v.p_below),
                    }
                )
    return rows


def write_budget(
    result: BudgetResult,
    design: BudgetedDesign,
    run_dir: Path,
    baseline: np.ndarray | None = None,
    components: pl.DataFrame | None = None,
) -> dict[str, str]:
    """The four files; their paths by the names the later stages take them as
    (``baseline``: the baseline's cells, run_budgeted's; ``components``: variance_rows')."""
    summary = budget_summary(result, design, baseline)
    summary["variance"] = variance_rows(result, design, components)
    return {
        "budget_path": str(write_json(summary, run_dir / BUDGET_FILE)),
        "budget_cells_path": str(
            write_parquet(cells_frame(result, design), run_dir / BUDGET_CELLS_FILE, BUDGET_CELLS)
        ),
        "budget_prompts_path": str(
            write_parquet(
                prompts_frame(result, design), run_dir / BUDGET_PROMPTS_FILE, BUDGET_PROMPTS
            )
        ),
        "budget_estimates_path": str(
            write_parquet(
                estimates_frame(result, design),
                run_dir / BUDGET_ESTIMATES_FILE,
                BUDGET_ESTIMATES,
            )
        ),
    }


def budget_line(record: dict[str, Any]) -> str:
    """ "budgeted: 1,604 of 7,968 cells (20%), stopped after round 3: every target met"."""
    share = record["share"] or 0.0
    if record["targets_unmet"]:
        why = "target not met for " + ", ".join(record["targets_unmet"])
    elif record["stop_reason"].startswith("every"):
        why = "every target met or verdict decided"
    else:
        why = "the budget was spent"
    k = record.get("samples", 1)
    each = f" x {k} samples ({record['generations']:,} generations)" if k > 1 else ""
    line = (
        f"budgeted: {record['cells']:,} of {record['full_cells']:,} cells ({share:.0%}){each}, "
        f"stopped after round {record['rounds_run']} of {record['rounds_planned']}: {why}"
    )
    baseline = record.get("baseline")
    if not baseline:
        return line
    rho = ", ".join(
        f"{split_column(name)[1]} {'NA' if r is None else f'{r:.2f}'}"
        for name, r in baseline["correlation"].items()
    )
    return f"{line}; baseline {baseline['run']} (correlation of the cells: {rho})"
