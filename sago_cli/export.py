"""``sago export``: a finished run's generations in the input schema of ``sago score``, or
(``--format hf-dataset``) its per-instance results as a Hugging Face dataset folder, or
(``--training KIND``) consistency-training data in TRL's formats with its split and card."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from sago_core.errors import ConfigError
from sago_core.external.export import SUFFIXES as FILE_SUFFIXES
from sago_core.external.hf_dataset import DEFAULT_LICENSE, HF_DATASET
from sago_core.training.export import KINDS as TRAINING_KINDS
from sago_core.training.split import (
    DEFAULT_DATASET_SHARE,
    DEFAULT_HELD_OUT_FAMILIES,
    DEFAULT_PROMPT_SHARE,
    DEFAULT_SEED,
)
from sago_core.vocabulary import MAIN_EPSILON


def output_path(text: str) -> Path:
    """A file named by its format's suffix, or a folder (no suffix) for ``hf-dataset``; any
    other suffix is refused before anything is written."""
    path = Path(text)
    if path.suffix and path.suffix.lower() not in FILE_SUFFIXES:
        raise argparse.ArgumentTypeError(
            f"{text!r} must end in {' or '.join(FILE_SUFFIXES)} (the format written), or "
            f"name a folder (no suffix) for --format {HF_DATASET}"
        )
    return path


def add_parser(commands: Any) -> None:
    export = commands.add_parser(
        "export",
        help="write a finished run's generations in the input schema of `sago score`, or its "
        "per-instance results as a Hugging Face dataset folder",
    )
    export.add_argument("run", type=Path, help="runs/<run_id>")
    export.add_argument(
        "--out",
        type=output_path,
        required=True,
        help=f"FILE.csv, FILE.jsonl or FILE.parquet; a FOLDER for --format {HF_DATASET}",
    )
    export.add_argument(
        "--format",
        choices=(HF_DATASET,),
        help=f"{HF_DATASET}: data/*.parquet of instances.parquet plus a dataset card README.md "
        "(default: the generations, in the format of --out's suffix)",
    )
    export.add_argument(
        "--license",
        help=f"{HF_DATASET}: the card's license (a Hub licence id, e.g. cc-by-4.0; default: "
        f"{DEFAULT_LICENSE}, to be chosen by the publisher)",
    )
    training = export.add_argument_group("training data (--training; --out names a folder)")
    training.add_argument(
        "--training",
        action="append",
        choices=TRAINING_KINDS,
        help="sft: variant prompt -> base answer; dpo: variant prompt, base answer chosen, "
        "variant answer rejected; pairs: base prompt, variant prompt, base answer (repeatable)",
    )
    training.add_argument(
        "--min-delta",
        action="append",
        metavar="AXIS=VALUE",
        help="keep instances with |d_AXIS| >= VALUE on any axis given (repeatable; default: "
        f"every axis at {MAIN_EPSILON})",
    )
    training.add_argument("--model", help="the run's model to take answers from (if several)")
    training.add_argument("--seed", type=int, default=DEFAULT_SEED, help="the split's seed")
    training.add_argument(
        "--held-out-prompts",
        type=float,
        default=DEFAULT_PROMPT_SHARE,
        metavar="SHARE",
        help=f"share of each dataset's prompts held out (default {DEFAULT_PROMPT_SHARE})",
    )
    training.add_argument(
        "--held-out-families",
        default=",".join(DEFAULT_HELD_OUT_FAMILIES),
        metavar="A,B",
        help="variant families held out (default: %(default)s)",
    )
    training.add_argument(
        "--held-out-datasets",
        metavar="A,B",
        help="datasets held out (default: a seeded draw of "
        f"{DEFAULT_DATASET_SHARE} of the run's datasets)",
    )


def _names(text: str | None) -> tuple[str, ...] | None:
    return None if text is None else tuple(n.strip() for n in text.split(",") if n.strip())


def _thresholds(items: list[str] | None) -> dict[str, float] | None:
    if not items:
        return None
    thresholds = {}
    for item in items:
        axis, _, value = item.partition("=")
        try:
            thresholds[axis.strip()] = float(value)
        except ValueError:
            raise ConfigError(f"--min-delta {item!r}: write AXIS=VALUE, e.g. bert=0.1") from None
    return thresholds


def _export_training(args: argparse.Namespace) -> Path:
    if args.format or args.license:
        raise ConfigError("--training writes its own folder: drop --format and --license")
    from sago_core.training.export import Filters, export_training
    from sago_core.training.split import SplitSpec

    spec = SplitSpec(
        seed=args.seed,
        prompt_share=args.held_out_prompts,
        held_out_families=_names(args.held_out_families) or (),
        held_out_datasets=_names(args.held_out_datasets),
    )
    thresholds = _thresholds(args.min_delta)
    filters = Filters() if thresholds is None else Filters(thresholds)
    return export_training(args.run, args.out, args.training, spec, filters, args.model)


def command(args: argparse.Namespace) -> int:
    if args.training:
        print(f"Exported: {_export_training(args)}")
        return 0
    if args.format == HF_DATASET:
        from sago_core.external.hf_dataset import export_hf_dataset

        path = export_hf_dataset(args.run, args.out, args.license)
    else:
        if not args.out.suffix:
            raise ConfigError(
                f"--out {args.out}: give FILE.csv, FILE.jsonl or FILE.parquet, or --format "
                f"{HF_DATASET} to write a folder"
            )
        if args.license:
            raise ConfigError(f"--license is for --format {HF_DATASET}")
        from sago_core.external.export import export_run

        path = export_run(args.run, args.out)
    print(f"Exported: {path}")
    return 0
