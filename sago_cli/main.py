"""The ``sago`` command line: the parser, built from one module per command, and dispatch.

A command module has ``add_parser(commands)`` and ``command(args) -> int``. A ``SagoError``
(bad input, a refused comparison, a run that did not complete) ends the command with its
message and exit code 2.
"""

from __future__ import annotations

import argparse
import sys
from types import ModuleType

from sago_cli import (
    card,
    checkpoints,
    compare,
    consistency,
    export,
    judge_audit,
    plan,
    report,
    resume,
    run,
    score,
    server_setup,
    site,
    train,
)
from sago_cli.parser import SagoParser
from sago_core.errors import SagoError

# In the order `sago --help` lists them.
COMMANDS: dict[str, ModuleType] = {
    "run": run,
    "report": report,
    "compare": compare,
    "card": card,
    "judge-audit": judge_audit,
    "resume": resume,
    "server-setup": server_setup,
    "consistency": consistency,
    "checkpoints": checkpoints,
    "score": score,
    "plan": plan,
    "export": export,
    "train": train,
    "site": site,
}


def build_parser() -> argparse.ArgumentParser:
    parser = SagoParser(  # its subcommands' parsers are SagoParsers too
        prog="sago",
        description="SAGO: does a language model behave the same on meaning-preserving "
        "variants of a prompt? Six signed deltas per prompt and variant, RMS scores, t-tests.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for module in COMMANDS.values():
        module.add_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        result: int = COMMANDS[args.command].command(args)
        return result
    except SagoError as exc:
        print(f"sago: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
