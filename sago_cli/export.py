"""``sago export``: a finished run's generations in the input schema of ``sago score``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from sago_cli.common import suffixed


def add_parser(commands: Any) -> None:
    export = commands.add_parser(
        "export",
        help="write a finished run's generations in the input schema of `sago score`",
    )
    export.add_argument("run", type=Path, help="runs/<run_id>")
    export.add_argument(
        "--out",
        type=suffixed(".csv", ".jsonl", ".parquet"),
        required=True,
        help="FILE.csv, FILE.jsonl or FILE.parquet",
    )


def command(args: argparse.Namespace) -> int:
    from sago_core.external.export import export_run

    path = export_run(args.run, args.out)
    print(f"Exported: {path}")
    return 0
