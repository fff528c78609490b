"""``sago plan``: the budgeted design with the narrowest predicted interval, planned from a
finished run's variance components (its ``deltas.parquet``; at K > 1 also its
``variance_components.parquet``). Reads artifacts only: no model, no generation."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sago_cli.common import run_folder

COLUMNS = ("model", "dataset", "prompt_id", "family", "subtype", "strength", "position", "axis")


@dataclass(frozen=True)
class Budget:
    """``--budget``: a share of the grid in (0, 1] or a number of generations (> 1)."""

    fraction: float | None = None
    generations: int | None = None


def budget_value(text: str) -> Budget:
    try:
        value = float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither a fraction in (0, 1] nor a number of generations"
        ) from exc
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: a budget must be above 0")
    if value <= 1:
        return Budget(fraction=value)
    if not value.is_integer():
        raise argparse.ArgumentTypeError(
            f"{text!r}: above 1 a budget is a whole number of generations"
        )
    return Budget(generations=int(value))


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
        "plan",
        help="plan a budgeted design from a finished run: prompts per dataset x variants per "
        "prompt x K with the narrowest predicted interval (no model)",
    )
    plan.add_argument("run", type=run_folder, help="a finished run folder (the pilot)")
    plan.add_argument(
        "--budget",
        type=budget_value,
        required=True,
        metavar="SHARE_OR_N",
        help="a share of the run's grid in (0, 1] (as sago run --budget: that share of the "
        "variant cells plus every prompt's base and replay) or a number of generations",
    )
    plan.add_argument("--model", help="the model whose deltas plan it (when the run holds several)")
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
    plan.add_argument("--top", type=int, default=5, help="designs listed")


def command(args: argparse.Namespace) -> int:
    from sago_cli.plan_report import plan_lines

    print("\n".join(plan_lines(read_pilot(args.run, args.model), args)))
    return 0


@dataclass(frozen=True)
class PilotRun:
    folder: Path
    model: str
    samples: int
    temperature: float
    grid: Any  # sago_core.budget.cells.GridValues
    variance_components: Any  # polars frame or None


def read_pilot(folder: Path, model: str | None) -> PilotRun:
    import polars as pl

    from sago_core.artifacts.layout import DELTAS_FILE, VARIANCE_COMPONENTS_FILE
    from sago_core.budget.cells import grid_from_deltas
    from sago_core.errors import InputError

    path = folder / DELTAS_FILE
    if not path.is_file():
        raise InputError("does not exist (a finished run folder holds it)", file=str(path))
    try:
        deltas = pl.read_parquet(path)
    except Exception as exc:  # polars raises several kinds for a file that is not Parquet
        raise InputError(f"is not a readable Parquet file ({exc})", file=str(path)) from exc
    for column in (*COLUMNS, "delta_norm"):
        if column not in deltas.columns:
            raise InputError("is not a run's deltas table", file=str(path), column=column)
    if deltas.is_empty():
        raise InputError("holds no rows", file=str(path))
    try:
        grid = grid_from_deltas(deltas, model)
    except ValueError as exc:
        raise InputError(f"{exc} (--model)", file=str(path), column="model") from exc
    name = model or str(deltas["model"][0])
    generation = _generation(folder)
    samples = int(generation.get("samples") or 1)
    components = folder / VARIANCE_COMPONENTS_FILE
    table = pl.read_parquet(components) if components.is_file() else None
    return PilotRun(folder, name, samples, float(generation.get("temperature") or 0.0), grid, table)


def _generation(folder: Path) -> dict[str, Any]:
    """The run's generation settings (run_config.json); none recorded: greedy, K = 1."""
    from sago_core.artifacts.layout import RUN_CONFIG
    from sago_core.errors import InputError

    path = folder / RUN_CONFIG
    if not path.is_file():
        return {}
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise InputError(f"is not valid JSON: {exc}", file=str(path)) from exc
    generation = config.get("generation") if isinstance(config, dict) else None
    return generation if isinstance(generation, dict) else {}
