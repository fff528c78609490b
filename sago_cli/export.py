"""``sago export KIND RUN``: a finished run's data for use elsewhere, one subcommand per kind.

``generations``: its answers in the input schema of ``sago score`` (CSV, JSONL or Parquet,
by ``--out``'s suffix); ``dataset``: its per-instance results as a Hugging Face dataset
folder with a card; ``inspect``: inspect_ai eval logs for its viewer; ``hf-results``: a
results dataset in the leaderboards' layout (optionally pushed to the Hub); ``training``:
consistency-training data in TRL's formats with its split and card (for ``sago train``)."""

from __future__ import annotations

import argparse
from typing import Any

from sago_cli.options import add_model, add_output, add_run, folder
from sago_core.errors import ConfigError
from sago_core.external.export import SUFFIXES as FILE_SUFFIXES
from sago_core.external.hf_dataset import DEFAULT_LICENSE
from sago_core.training.export import KINDS as TRAINING_KINDS
from sago_core.training.split import (
    DEFAULT_DATASET_SHARE,
    DEFAULT_HELD_OUT_FAMILIES,
    DEFAULT_PROMPT_SHARE,
    DEFAULT_SEED,
)
from sago_core.vocabulary import MAIN_EPSILON


def add_parser(commands: Any) -> None:
    export = commands.add_parser(
        "export",
        help="export a finished run's answers, instances or training data (for `sago score`, "
        "the Hugging Face Hub, `sago train`)",
    )
    modes = export.add_subparsers(dest="mode", required=True, metavar="MODE", help="what to export")
    generations = modes.add_parser(
        "generations", help="the run's answers in the input schema of `sago score`"
    )
    add_run(generations)
    add_output(
        generations,
        "the answers (the format follows the suffix)",
        suffixes=FILE_SUFFIXES,
        required=True,
    )
    dataset = modes.add_parser(
        "dataset",
        help="data/*.parquet of instances.parquet plus a dataset card README.md",
    )
    add_run(dataset)
    add_output(dataset, "the dataset folder", required=True, type=folder)
    dataset.add_argument(
        "--license",
        help="the card's license (a Hub licence id, e.g. cc-by-4.0; default: "
        f"{DEFAULT_LICENSE}, to be chosen by the publisher)",
    )
    inspect = modes.add_parser(
        "inspect", help="one inspect_ai eval log per model and dataset, for `inspect view`"
    )
    add_run(inspect)
    add_output(inspect, "the logs' folder (new or empty)", required=True, type=folder)
    results = modes.add_parser(
        "hf-results",
        help="the run as a results dataset in the layout evaluation leaderboards read",
    )
    add_run(results)
    add_output(
        results, "the dataset repository's folder (new or empty)", required=True, type=folder
    )
    results.add_argument(
        "--push",
        metavar="OWNER/NAME",
        help="also upload the folder to this Hub dataset repository (created private if it "
        "does not exist; the token is huggingface_hub's own)",
    )
    training = modes.add_parser(
        "training",
        help="consistency-training data in TRL's formats, with its split and card",
    )
    add_run(training)
    add_output(training, "the training-data folder", required=True)
    training.add_argument(
        "--kind",
        action="append",
        required=True,
        choices=TRAINING_KINDS,
        help="sft: variant prompt -> base answer; dpo: variant prompt, base answer chosen, "
        "variant answer rejected; consistency: base prompt, variant prompt, base answer "
        "(repeatable)",
    )
    training.add_argument(
        "--min-delta",
        action="append",
        metavar="AXIS=VALUE",
        help="keep instances with |d_AXIS| >= VALUE on any axis given (repeatable; default: "
        f"every axis at {MAIN_EPSILON})",
    )
    add_model(training, "the run's model to take answers from (when it holds several)")
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


def command(args: argparse.Namespace) -> int:
    if args.mode == "training":
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
        path = export_training(args.run, args.out, args.kind, spec, filters, args.model)
    elif args.mode == "inspect":
        from sago_core.external.inspect_export import export_inspect

        logs = export_inspect(args.run, args.out)
        print(
            f"Exported {len(logs)} inspect logs to {args.out} (inspect view --log-dir {args.out})"
        )
        return 0
    elif args.mode == "hf-results":
        from sago_core.external.hub_results import export_hub_results, push_results

        export_hub_results(args.run, args.out)
        path = args.out
        if args.push:
            print(f"Pushed: {push_results(args.out, args.push)}")
    elif args.mode == "dataset":
        from sago_core.external.hf_dataset import export_hf_dataset

        path = export_hf_dataset(args.run, args.out, args.license)
    else:
        from sago_core.external.export import export_run

        path = export_run(args.run, args.out)
    print(f"Exported: {path}")
    return 0
