"""``sago run``: evaluate models on datasets (rerunning the same command resumes).

Parses the options into one strict configuration (preset, then ``--config``, then these
overrides) and hands it to ``sago.run`` (or ``sago.dry_run``); the API owns the preflight,
the Prefect environment and the stop handling (``sago/evaluation.py``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from sago.evaluation import run_sweep, stop_line
from sago.result import RunResult
from sago_cli.common import csv_list
from sago_cli.options import add_budget, add_models, add_run_place
from sago_core.artifacts.layout import REPORT_FILE
from sago_core.config import BUILTIN_DATASET, DATASET_NAMES, PRESETS, RunConfig
from sago_core.data.user_files import join_mapped_entries
from sago_core.errors import ConfigError
from sago_core.registry.backends import BUILTIN as BUILTIN_BACKENDS
from sago_core.site.paths import INDEX, SITE_DIR
from sago_core.sweep import is_sweep

# The built-in backends only: naming the plug-ins' here would import every plug-in on every
# command (the whole parser is built before one command runs), warning about a broken one
# even where no backend is used.
BACKENDS_IN_HELP = ", ".join(spec.name for spec in BUILTIN_BACKENDS) + " or a plug-in's"

__all__ = [
    "add_parser",
    "command",
    "config_from_args",
    "run_command",
    "run_sweep",
    "show_result",
    "stop_line",
]


def add_parser(commands: Any) -> None:
    run = commands.add_parser(
        "run",
        help="evaluate models on datasets (rerunning the same command resumes and reuses work)",
        description="Evaluate models. Later options override the config file, which "
        "overrides the preset.",
    )
    run.add_argument("--config", type=Path, help="YAML config file (strict schema)")
    run.add_argument(
        "--preset",
        choices=tuple(PRESETS),
        help="demo (default), paper grid, locate (demo + activation patching), or sampling "
        "(demo at T 0.7 with 8 samples per prompt text)",
    )
    add_models(
        run,
        f"comma-separated BACKEND:ID specs; BACKEND in {BACKENDS_IN_HELP}; "
        "ID a local path, hub id or API model; alias smollm2-135m = the embedded model "
        "(default hf:smollm2-135m)",
    )
    run.add_argument(
        "--datasets",
        type=csv_list,
        help=f"comma-separated names: {BUILTIN_DATASET}, {', '.join(DATASET_NAMES)}, "
        "or paths to .csv/.jsonl/.json/.parquet files with a 'question' column, in a "
        "dataset's own layout, or mapped per file: 'a.csv#question=Question,answer=Best Answer'",
    )
    run.add_argument(
        "--data-dir",
        type=Path,
        help="folder holding the named datasets' files, one subfolder per dataset name",
    )
    run.add_argument(
        "--question-column", help="question column of a user's own data file (default question)"
    )
    run.add_argument(
        "--strict-placeholders",
        action="store_true",
        help="placeholder-like text ({name}) in a user's prompt is an error, not a warning",
    )
    run.add_argument(
        "--n", type=int, help=f"prompts sampled per dataset (seeded; {preset_defaults('n')})"
    )
    run.add_argument(
        "--max-new-tokens",
        type=int,
        help=f"generation length cap ({preset_defaults('generation.max_new_tokens')})",
    )
    run.add_argument(
        "--seed", type=int, help=f"run seed (sampling and noise; {preset_defaults('seed')})"
    )
    add_run_place(run, "preset + config hash")
    add_budget(
        run,
        "budgeted run, in rounds that stop once the verdicts are known (a share here; plan a "
        "number of generations with sago design)",
    )
    run.add_argument(
        "--baseline",
        metavar="RUN",
        help="with --budget: a finished full run of the same design (the last release), its "
        "cells the estimator's control variate (budget.baseline)",
    )
    run.add_argument(
        "--track",
        action="append",
        metavar="TRACKER",
        help="log the finished run to an experiment tracker: mlflow=URI or a bare tracking URI "
        "(http://..., file:..., sqlite:///...), wandb or wandb=PROJECT (repeatable; the "
        "config's tracking section)",
    )
    run.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan (prompts, variants, generations, API requests, tokens, cost "
        "ceiling, budget) without loading a model or calling an API",
    )


def preset_defaults(key: str) -> str:
    """``default: demo 2, paper 500, ...``: a dotted config key's value in each preset."""
    values = []
    for name, preset in PRESETS.items():
        value: Any = preset
        for part in key.split("."):
            value = getattr(value, part)
        values.append(f"{name} {value}")
    return "default: the preset's, " + ", ".join(values)


def command(args: argparse.Namespace) -> int:
    from sago import dry_run

    config = config_from_args(args)
    if args.dry_run:
        dry_run(config)
        return 0
    return run_command(config)


def config_from_args(args: argparse.Namespace) -> RunConfig:
    from sago import configure
    from sago_core.config import read_config_file

    file_values: dict[str, Any] = read_config_file(args.config) if args.config else {}
    overrides: dict[str, Any] = {
        "datasets": join_mapped_entries(args.datasets) if args.datasets else None,
        "strict_placeholders": True if args.strict_placeholders else None,
        "data_dir": args.data_dir,
        "question_column": args.question_column,
        "seed": args.seed,
        "runs_dir": args.runs_dir,
        "run_id": args.run_id,
        "prefect_home": args.prefect_home,
    }
    if args.track:
        from sago_core.config.tracking import track_option

        overrides["tracking"] = track_option(args.track)
    if args.budget is not None:
        if args.budget.fraction is None:
            raise ConfigError(
                f"--budget {args.budget.generations}: sago run takes a share of the grid in "
                "(0, 1]; sago design turns a number of generations into a design"
            )
        budget = {k: v for k, v in (file_values.get("budget") or {}).items() if k != "generations"}
        overrides["budget"] = {**budget, "fraction": args.budget.fraction}
    if args.baseline:
        if "budget" not in overrides:
            raise ConfigError(f"--baseline {args.baseline}: give --budget too")
        overrides["budget"]["baseline"] = args.baseline
    source = f"{args.config} and command line" if args.config else "command line"
    return configure(
        args.models,
        n=args.n,
        max_new_tokens=args.max_new_tokens,
        preset=args.preset,
        config=file_values,
        source=source,
        **overrides,
    )


def run_command(config: RunConfig) -> int:
    """``sago.run`` on ``config``, then what it made (``show_result``)."""
    from sago import run

    return show_result(run(config=config), sweep=is_sweep(config))


def show_result(result: RunResult, sweep: bool) -> int:
    """What a finished run made, as ``sago run`` and ``sago resume`` print it (a temperature
    sweep's arms printed their own as they finished)."""
    if sweep:
        return 0
    print(result.summary_text)
    print(f"Artifacts: {result.folder}")
    if result.report is not None:
        print(f"Report: {result.folder / REPORT_FILE}")
    site = result.folder.parent / SITE_DIR / INDEX
    if site.is_file():  # a watch built one over this runs folder
        print(f"Site: {site} (add this run: sago site {result.folder.parent})")
    return 0
