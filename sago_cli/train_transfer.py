"""``sago compare --transfer BEFORE AFTER``: did a training's stability gain carry over to
the families, prompts and datasets it was not trained on? Two runs of the same design, before
and after training; the split is the training's own (read from the trained model's folder, or
given with ``--split``). Writes the table (Parquet) and the report (Markdown) and, when AFTER
evaluated a ``sago train`` result, adds the report to that checkpoint's card."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from sago_cli.common import check_finished_run
from sago_core.errors import ConfigError

TRANSFER_TABLE = Path("transfer.parquet")  # --out's default with --transfer


def add_arguments(compare: Any) -> None:
    from sago_core.training.transfer import DEFAULT_CORRECTNESS_MARGIN

    compare.add_argument(
        "--transfer",
        action="store_true",
        help="two runs of the same design, before and after `sago train`: the change of s "
        "per cell of trained/held-out families, prompts and datasets, and whether the gain "
        "transfers (the table: --out, default transfer.parquet; transfer.md beside it)",
    )
    compare.add_argument(
        "--split",
        type=Path,
        help="--transfer: the training's split.json (default: the one of the data the "
        "trained model of the second run was trained on)",
    )
    compare.add_argument(
        "--correctness-margin",
        type=float,
        default=DEFAULT_CORRECTNESS_MARGIN,
        help="--transfer: equivalence margin of the capability check (a share of prompts)",
    )


def _split_path(args: argparse.Namespace, after: Path) -> tuple[Path, Path | None]:
    """The split file, and the trained model's folder when AFTER evaluated one."""
    from sago_core.report.paired_runs import read_run_config
    from sago_core.training.result import training_data, training_folder
    from sago_core.training.split import SPLIT_FILE

    models = read_run_config(after).get("models") or []
    folder = training_folder(models[0]) if len(models) == 1 else None
    if args.split is not None:
        return args.split, folder
    if folder is None:
        raise ConfigError(
            f"--transfer: the second run ({after}) does not evaluate a `sago train` result "
            "(hf:OUT/model): name the training's split with --split DATA/split.json"
        )
    return training_data(folder) / SPLIT_FILE, folder


def transfer_command(args: argparse.Namespace) -> int:
    from sago_core.artifacts.store import write_parquet, write_text
    from sago_core.training.result import add_transfer_to_card
    from sago_core.training.split import read_split
    from sago_core.training.transfer import (
        TRANSFER,
        check_transfer_design,
        correctness_table,
        render_transfer,
        transfer_table,
    )

    if len(args.runs) != 2:
        raise ConfigError(f"--transfer compares two runs (BEFORE AFTER), got {len(args.runs)}")
    before, after = args.runs
    for run_dir in args.runs:
        check_finished_run(run_dir)
    split_path, folder = _split_path(args, after)
    check_transfer_design(before, after)
    split = read_split(split_path)
    table = transfer_table(before, after, split, args.margin)
    correctness = correctness_table(before, after, split, args.correctness_margin)
    text = render_transfer(table, correctness, args.margin, args.correctness_margin)
    out = args.out or TRANSFER_TABLE
    if out.suffix != ".parquet":
        raise ConfigError(f"--out {out}: --transfer writes a Parquet table; give a .parquet name")
    write_parquet(table, out, TRANSFER)
    write_text(text, out.with_suffix(".md"))
    print(text)
    print(f"Transfer table: {out}")
    if folder is not None:
        print(f"Added to the checkpoint's card: {add_transfer_to_card(folder, text)}")
    return 0
