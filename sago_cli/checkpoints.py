"""``sago checkpoints``: make a checkpoint series of a model (fine-tuning or quantisation)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from sago_cli.common import csv_list, int_list
from sago_core.errors import ConfigError


def add_parser(commands: Any) -> None:
    checkpoints = commands.add_parser(
        "checkpoints", help="make a checkpoint series of a model (fine-tuning or quantisation)"
    )
    checkpoints.add_argument(
        "kind",
        choices=("finetune", "quantize"),
        help="finetune: save checkpoints along a short fine-tuning; quantize: one checkpoint "
        "per bit width",
    )
    checkpoints.add_argument("--base", default="smollm2-135m", help="model id or local folder")
    checkpoints.add_argument("--out", type=Path, required=True, help="folder for the series")
    checkpoints.add_argument(
        "--steps", type=int_list, default=[0, 2, 4, 8], help="finetune: cumulative steps to save"
    )
    checkpoints.add_argument(
        "--bits", type=int_list, default=[32, 8, 6, 4], help="quantize: bit widths to save"
    )
    checkpoints.add_argument(
        "--learning-rate", type=float, default=2e-5, help="finetune: the optimiser's step size"
    )
    checkpoints.add_argument(
        "--datasets",
        type=csv_list,
        default=["builtin_train"],
        help="finetune: training questions (default builtin_train: apart from every built-in "
        "evaluation prompt; a study refuses checkpoints trained on what it evaluates)",
    )
    checkpoints.add_argument(
        "--data-dir",
        type=Path,
        help="finetune: folder of the named datasets' files (one subfolder per dataset)",
    )


def command(args: argparse.Namespace) -> int:
    from sago_core.backends.model_source import resolve_local_model
    from sago_core.checkpoints.series import finetune_series, quantize_series
    from sago_core.checkpoints.training_split import TrainingSplit
    from sago_core.consistency.series import training_candidates

    source = resolve_local_model(args.base)
    if args.kind == "quantize":
        saved = quantize_series(source, args.bits, args.out)
    else:
        rows = [p for name in args.datasets for p in training_candidates(name, args.data_dir)]
        split = TrainingSplit(",".join(args.datasets), tuple(p for p in rows if p.references))
        if not split.prompts:
            raise ConfigError(f"datasets {args.datasets} hold no reference answers to train on")
        saved = finetune_series(source, split, args.steps, args.out, args.learning_rate)
    for folder in saved:
        print(f"hf:{folder}")
    return 0
