"""``sago series finetune|quantize``: make a model series for ``sago study`` (checkpoints along
a short fine-tuning, or one per bit width). "Series", not "checkpoints": a checkpoint is a
LoRA resume point of ``sago train``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from sago_cli.common import csv_list, int_list
from sago_cli.options import add_model, add_output
from sago_core.errors import ConfigError


def add_parser(commands: Any) -> None:
    checkpoints = commands.add_parser(
        "series", help="make a model series for `sago study` (fine-tuning or quantisation)"
    )
    checkpoints.add_argument(
        "kind",
        choices=("finetune", "quantize"),
        help="finetune: save checkpoints along a short fine-tuning; quantize: one checkpoint "
        "per bit width",
    )
    add_model(checkpoints, "the local model the series starts from", default="hf:smollm2-135m")
    add_output(checkpoints, "the series (one folder per member)", required=True)
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
    from sago_core.study.series import training_candidates
    from sago_core.training.split import TrainingSplit

    backend, sep, model_id = args.model.partition(":")
    if sep and backend != "hf":
        raise ConfigError(f"--model {args.model}: a series is made from local weights (hf:)")
    source = resolve_local_model(model_id if sep else args.model)
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
