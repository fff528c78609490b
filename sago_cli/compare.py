"""``sago compare page|paired|transfer``: finished runs side by side. ``page``: one HTML
report across several runs (rankings, reversals); ``paired``: the paired tests of two runs
over the same prompts (is B less stable than A?); ``transfer``: did a training's gain carry
over to what it was not trained on. The work is ``sago.compare``'s."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from sago.comparing import COMPARISON_PAGE, TRANSFER_TABLE, check_encoders
from sago_cli.options import add_differences, add_margin, add_output, add_runs

__all__ = ["add_parser", "check_encoders", "command"]


def add_parser(commands: Any) -> None:
    from sago_core.artifacts.layout import PAIRED_FILE
    from sago_core.training.transfer import DEFAULT_CORRECTNESS_MARGIN

    compare = commands.add_parser(
        "compare", help="finished runs side by side: a page, paired tests, or a training's transfer"
    )
    modes = compare.add_subparsers(
        dest="mode", required=True, metavar="MODE", help="what to make of the runs"
    )
    page = modes.add_parser(
        "page", help="one HTML report across several finished runs (rankings, reversals)"
    )
    add_runs(page, "the runs to put side by side (folders or store URLs)")
    add_output(page, "the page", suffixes=(".html",), default=COMPARISON_PAGE)
    add_differences(page, "encoders")
    paired = modes.add_parser(
        "paired",
        help="two runs, the same prompts: paired t-test, Wilcoxon, bootstrap CI and an "
        "equivalence test per dataset and axis (is B less stable than A?)",
        description="Budgeted runs: says which cells each asked and pairs them on the cells "
        "both asked where honest. Writes the table, paired.md beside it, and for runs whose "
        "prompts carry a kind the refusal table too.",
    )
    add_runs(paired, "A then B (folders or store URLs)", count=2)
    add_output(
        paired, "the table (paired.md beside it)", suffixes=(".parquet",), default=Path(PAIRED_FILE)
    )
    add_margin(paired)
    add_differences(paired, "configs", "sampling", "encoders")
    transfer = modes.add_parser(
        "transfer",
        help="two runs of the same design, before and after `sago train`: did the stability "
        "gain carry over to held-out families, prompts and datasets?",
    )
    add_runs(transfer, "BEFORE then AFTER (folders or store URLs)", count=2)
    add_output(
        transfer,
        "the table (transfer.md beside it)",
        suffixes=(".parquet",),
        default=TRANSFER_TABLE,
    )
    add_margin(transfer)
    transfer.add_argument(
        "--split",
        type=Path,
        help="the training's split.json (default: the one of the data the trained model of "
        "the second run was trained on)",
    )
    transfer.add_argument(
        "--correctness-margin",
        type=float,
        default=DEFAULT_CORRECTNESS_MARGIN,
        help="equivalence margin of the capability check (a share of prompts)",
    )


def command(args: argparse.Namespace) -> int:
    from sago import compare

    compare(
        args.runs,
        mode=args.mode,
        out=args.out,
        margin=getattr(args, "margin", None),
        allow_different_configs=getattr(args, "allow_different_configs", False),
        allow_different_sampling=getattr(args, "allow_different_sampling", False),
        allow_different_encoders=getattr(args, "allow_different_encoders", False),
        strict_identity=getattr(args, "strict_identity", False),
        split=getattr(args, "split", None),
        correctness_margin=getattr(args, "correctness_margin", None),
    )
    return 0
