"""``sago judge-audit``: a human check of the register judge (export a sample, score labels)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from sago_cli.common import check_finished_run, run_folder, suffixed
from sago_core.errors import ConfigError


def add_parser(commands: Any) -> None:
    audit = commands.add_parser(
        "judge-audit", help="human check of the register judge: export a sample, score labels"
    )
    audit.add_argument(
        "action",
        choices=("export", "score"),
        help="export: write a sample of judged pairs to label; score: agreement of the labels "
        "with the judge",
    )
    audit.add_argument("run", type=run_folder, help="a finished run judged with judge.model set")
    audit.add_argument(
        "--out",
        type=suffixed(".csv"),
        default=Path("judge_audit.csv"),
        help="export: the CSV to label",
    )
    audit.add_argument("--labels", type=Path, help="score: the labelled CSV")
    audit.add_argument("--share", type=float, default=0.1, help="export: share of pairs")
    audit.add_argument("--seed", type=int, default=0, help="export: sampling seed")


def command(args: argparse.Namespace) -> int:
    from sago_core.report.judge_audit import export_sample, score_labels

    check_finished_run(args.run)
    if args.action == "export":
        count = export_sample(args.run, args.out, args.share, args.seed)
        print(f"Exported {count} pairs for labelling: {args.out} (fill human_label with 1/0)")
        return 0
    if args.labels is None:
        raise ConfigError("judge-audit score needs --labels LABELLED.csv")
    print(json.dumps(score_labels(args.run, args.labels), indent=2))
    return 0
