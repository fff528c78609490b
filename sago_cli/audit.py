"""``sago audit``: check the instruments a run measures with, against people or each other.

``judge export|score``: a person's check of the register judge (a sample of judged pairs to
label, then the labels' agreement with the judge); ``refusal sample|judge|score``: a person's
check of the refusal rules (``audit_refusal``); ``encoder``: SGS-BERT under a second BERTScore
encoder and the rank agreement of the two; ``bertscore-baseline``: the rescaling baseline of
an encoder (``audit_encoder``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from sago_cli import audit_encoder, audit_refusal
from sago_cli.common import check_finished_run
from sago_cli.options import add_output, add_run
from sago_core.errors import ConfigError


def add_parser(commands: Any) -> None:
    audit = commands.add_parser(
        "audit",
        help="check the judge, the refusal rules and the BERTScore encoder (against a "
        "person's labels, a second encoder, unrelated sentences)",
    )
    checks = audit.add_subparsers(
        dest="check", required=True, metavar="CHECK", help="the instrument to check"
    )
    judge = checks.add_parser(
        "judge", help="a person's check of the register judge: export a sample, score labels"
    )
    judge.add_argument(
        "action",
        choices=("export", "score"),
        help="export: write a sample of judged pairs to label; score: agreement of the labels "
        "with the judge",
    )
    add_run(judge, "a finished run judged with register_judge.model set (folder or store URL)")
    add_output(
        judge, "export: the CSV to label", suffixes=(".csv",), default=Path("judge_audit.csv")
    )
    judge.add_argument("--labels", type=Path, help="score: the labelled CSV")
    judge.add_argument("--share", type=float, default=0.1, help="export: share of pairs")
    judge.add_argument("--seed", type=int, default=0, help="export: sampling seed")
    audit_refusal.add_parser(checks)
    audit_encoder.add_parsers(checks)


def command(args: argparse.Namespace) -> int:
    if args.check == "refusal":
        return audit_refusal.command(args)
    if args.check in audit_encoder.CHECKS:
        return audit_encoder.command(args)
    return judge_command(args)


def judge_command(args: argparse.Namespace) -> int:
    from sago_core.report.judge_audit import export_sample, score_labels

    check_finished_run(args.run)
    if args.action == "export":
        count = export_sample(args.run, args.out, args.share, args.seed)
        print(f"Exported {count} pairs for labelling: {args.out} (fill human_label with 1/0)")
        return 0
    if args.labels is None:
        raise ConfigError("audit judge score needs --labels LABELLED.csv")
    print(json.dumps(score_labels(args.run, args.labels), indent=2))
    return 0
