"""``sago export``: a finished run's generations in the input schema of ``sago score``, or
(``--format hf-dataset``) its per-instance results as a Hugging Face dataset folder."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from sago_core.errors import ConfigError
from sago_core.external.export import SUFFIXES as FILE_SUFFIXES
from sago_core.external.hf_dataset import DEFAULT_LICENSE, HF_DATASET


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


def command(args: argparse.Namespace) -> int:
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
