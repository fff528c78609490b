"""``sago track``: log a finished run (or a paired comparison's table) to experiment
trackers after the fact, e.g. once a tracker that was down when the run finished is back."""

from __future__ import annotations

import argparse
from typing import Any

from sago_cli.options import add_run

TRACK_HELP = (
    "an experiment tracker: mlflow=URI or a bare tracking URI (http://..., file:..., "
    "sqlite:///...), wandb or wandb=PROJECT (repeatable)"
)


def add_parser(commands: Any) -> None:
    track = commands.add_parser(
        "track", help="log a finished run or a paired comparison to experiment trackers"
    )
    add_run(track, "a finished run (folder or store URL), or sago compare paired's table")
    track.add_argument(
        "--track", action="append", required=True, metavar="TRACKER", help=TRACK_HELP
    )


def command(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from sago_core.config.tracking import TrackingSettings, track_option
    from sago_core.errors import ConfigError
    from sago_core.tracking import track_run
    from sago_core.tracking.track import outcome_lines

    try:
        settings = TrackingSettings.model_validate(track_option(args.track))
    except ValidationError as exc:
        raise ConfigError(f"--track: {exc.errors()[0]['msg']}") from exc
    outcomes = track_run(args.run, settings)
    for line in outcome_lines(outcomes):
        print(line)
    return 0 if all(o.warning is None for o in outcomes) else 1
