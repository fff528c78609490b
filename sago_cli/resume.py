"""``sago resume``: continue a failed or killed run from its saved configuration
(``sago.evaluation.saved_config``; a temperature sweep's folder continues the sweep)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from sago_cli.options import add_run
from sago_cli.run import run_command


def add_parser(commands: Any) -> None:
    resume = commands.add_parser(
        "resume",
        help="continue a failed or killed run: only unfinished shards and stages are computed",
    )
    add_run(resume, "the run folder (or its store URL) of an unfinished run")


def command(args: argparse.Namespace) -> int:
    return resume_command(args.run)


def resume_command(run_dir: Path) -> int:
    """The run's own saved configuration, run again through ``sago run``'s path: every
    finished stage and shard is a cache hit."""
    from sago.evaluation import saved_config

    return run_command(saved_config(run_dir))
