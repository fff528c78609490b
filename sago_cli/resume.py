"""``sago resume``: continue a failed or killed run from its saved configuration."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from sago_cli.common import run_folder
from sago_cli.run import run_command
from sago_core.artifacts.layout import RunLayout
from sago_core.config import RunConfig
from sago_core.errors import InputError


def add_parser(commands: Any) -> None:
    resume = commands.add_parser(
        "resume",
        help="continue a failed or killed run: only unfinished shards and stages are computed",
    )
    resume.add_argument("run", type=run_folder, help="the run folder (or its store URL)")


def command(args: argparse.Namespace) -> int:
    return resume_command(args.run)


def resume_command(run_dir: Path) -> int:
    """The run's own saved configuration, run again: every finished stage and shard is a
    cache hit, so only what the failure or kill left unfinished is computed."""
    from pydantic import ValidationError

    saved = RunLayout(run_dir).run_config
    if not saved.is_file():
        raise InputError(f"has no {saved.name} (not a sago run folder)", file=str(run_dir))
    try:
        config = RunConfig.model_validate(json.loads(saved.read_text(encoding="utf-8")))
    except (ValueError, ValidationError) as exc:
        raise InputError(f"is not a valid run configuration: {exc}", file=str(saved)) from exc
    return run_command(config)
