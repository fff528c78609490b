"""``sago card``: the stability card of a finished run (card.md, card.html, card.json)."""

from __future__ import annotations

import argparse
from typing import Any

from sago_cli.common import check_finished_run, run_folder
from sago_cli.options import add_differences, add_margin, add_run


def add_parser(commands: Any) -> None:
    card = commands.add_parser(
        "card",
        help="write the stability card of a finished run (card.md, card.html, card.json)",
    )
    add_run(card, "the release's run (folder or store URL)")
    card.add_argument(
        "--against",
        type=run_folder,
        metavar="RUN",
        help="the previous release's run (folder or store URL)",
    )
    add_margin(card)
    add_differences(card, "configs", "sampling")


def command(args: argparse.Namespace) -> int:
    from sago_core.report.card.build import write_card
    from sago_core.report.sweep.card import is_sweep_folder, write_sweep_card

    if is_sweep_folder(args.run) and not args.against:
        print(f"Card: {', '.join(str(p) for p in write_sweep_card(args.run))}")
        return 0
    for run_dir in [args.run, *([args.against] if args.against else [])]:
        check_finished_run(run_dir)
    paths = write_card(
        args.run,
        args.against,
        margin=args.margin,
        allow_different_configs=args.allow_different_configs,
        strict_identity=args.strict_identity,
        allow_different_sampling=args.allow_different_sampling,
    )
    print(f"Card: {', '.join(str(p) for p in paths)}")
    return 0
