"""``sago resume``: continue a failed or killed run from its saved configuration, through the
API's ``sago.resume`` (a temperature sweep's folder continues the sweep)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from sago_cli.options import add_run
from sago_cli.run import show_result
from sago_core.sweep import is_sweep


def add_parser(commands: Any) -> None:
    resume = commands.add_parser(
        "resume",
        help="continue a failed or killed run: only unfinished shards and stages are computed",
    )
    add_run(resume, "the run folder (or its store URL) of an unfinished run")


def command(args: argparse.Namespace) -> int:
    return resume_command(args.run)


def resume_command(run_dir: Path) -> int:
    """``sago.resume`` (every finished stage and shard a cache hit; a moved folder continues
    where it is now), printed as ``sago run`` prints a run."""
    from sago import resume
    from sago.evaluation import saved_config

    sweep = is_sweep(saved_config(run_dir))  # a sweep's folder holds no summary to print
    return show_result(resume(run_dir), sweep)
