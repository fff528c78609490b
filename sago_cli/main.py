"""The ``sago`` command line: the parser, built from one module per command, and dispatch.

A command module has ``add_parser(commands)`` and ``command(args) -> int``; it parses and
calls the Python API (``sago``). ``sago --help`` lists the commands in the groups of
``GROUPS``, one line each. Old spellings are rewritten first (``legacy``), each rewrite
said in one line on stderr. A ``SagoError`` (bad input, a refused comparison, a run that did
not complete) ends the command with its message and exit code 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Generator
from types import ModuleType

from sago_cli import (
    audit,
    card,
    compare,
    design,
    export,
    report,
    resume,
    run,
    score,
    series,
    server_setup,
    site,
    study,
    track,
    train,
)
from sago_cli.legacy import modern
from sago_cli.parser import SagoParser
from sago_core.errors import SagoError

COMMANDS: dict[str, ModuleType] = {
    "run": run,
    "resume": resume,
    "score": score,
    "design": design,
    "report": report,
    "card": card,
    "compare": compare,
    "export": export,
    "site": site,
    "track": track,
    "audit": audit,
    "train": train,
    "series": series,
    "study": study,
    "server-setup": server_setup,
}

# What a user is doing -> its commands, in the order `sago --help` lists them.
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Evaluate models", ("run", "resume", "score", "design")),
    ("Read finished runs", ("report", "card", "compare", "export", "site", "track")),
    ("Check the instruments", ("audit",)),
    ("Train and study", ("train", "series", "study")),
    ("Run on a Prefect server", ("server-setup",)),
)


class GroupedHelp(argparse.RawDescriptionHelpFormatter):
    """``sago --help``: the commands are listed by group in the epilog, not once more in
    argparse's own flat list."""

    def _iter_indented_subactions(
        self, action: argparse.Action
    ) -> Generator[argparse.Action, None, None]:
        yield from ()


class CommandLine(SagoParser):
    """The top-level parser: it reads old spellings as today's (``legacy.modern``, saying so
    on stderr) before parsing, so ``build_parser().parse_args`` and ``main`` agree on every
    spelling."""

    def parse_known_args(  # type: ignore[override]
        self, args: list[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        given = sys.argv[1:] if args is None else list(args)
        return super().parse_known_args(modern(given, tell_new_spelling), namespace)


def tell_new_spelling(line: str) -> None:
    """One line on stderr per rewritten old spelling, so a script's author learns the new
    one (stdout stays the command's own output)."""
    print(f"sago: {line}", file=sys.stderr)


def build_parser() -> argparse.ArgumentParser:
    parser = CommandLine(  # its subcommands' parsers are SagoParsers (no second rewrite)
        prog="sago",
        description="SAGO: does a language model behave the same on meaning-preserving "
        "variants of a prompt?\nSix signed deltas per prompt and variant, RMS scores, t-tests.",
        formatter_class=GroupedHelp,
    )
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=SagoParser
    )
    for module in COMMANDS.values():
        module.add_parser(commands)
    lines = {action.dest: action.help or "" for action in commands._choices_actions}
    commands.help = "one of the commands below; `sago COMMAND --help` for its options"
    parser.epilog = grouped_help(lines)
    return parser


def grouped_help(lines: dict[str, str], width: int = 100) -> str:
    """The commands by group, one line each (a help text cut at its first clause)."""
    name_width = max(len(name) for name in lines) + 2
    out = []
    for title, names in GROUPS:
        out.append(f"{title}:")
        for name in names:
            text = lines[name].split(": ")[0].split(" (")[0]
            room = width - name_width - 2
            if len(text) > room:
                text = text[: room - 3].rsplit(" ", 1)[0] + " ..."
            out.append(f"  {name:<{name_width}}{text}")
        out.append("")
    return "\n".join(out).rstrip()


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
