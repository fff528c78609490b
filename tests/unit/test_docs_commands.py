"""Every command line the README and the docs show (a code-block line starting ``sago ``)
is spelled as today's (no old spelling the parser would rewrite) and parses with today's
parser, so a renamed command or option cannot leave a page behind.

A line the program prints (``sago: error: ...``, ``sago tracking: ...``: its first word
after ``sago`` ends in a colon) and blocks marked as output (``text``) are not commands.
Placeholders stay as they are (``<run>`` and ``RUN`` are plain words to the parser); a store
URL is read as a local path here, since the run-folder argument would fetch it at parse
time; ``--help`` lines count when the parser stops to print help and nothing else.
"""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from sago_cli.legacy import modern
from sago_cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
STORE_URL = re.compile(r"^(s3|gs|az)://")
SHELL = ("", "bash", "sh", "shell", "console")  # a fenced block's language that holds commands


def command_lines(text: str) -> list[tuple[int, str]]:
    """``(line number, command)`` for each ``sago`` line inside a fenced code block, with
    backslash continuations joined."""
    found: list[tuple[int, str]] = []
    fenced, shell, pending, start = False, False, "", 0
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("```"):
            fenced, pending = not fenced, ""
            shell = fenced and stripped[3:].strip() in SHELL
            continue
        if not shell:
            continue
        if pending:
            pending += " " + stripped
        elif stripped.startswith("sago ") and not stripped.split()[1].endswith(":"):
            pending, start = stripped, number
        else:
            continue
        if pending.endswith("\\"):
            pending = pending[:-1]
        else:
            found.append((start, pending))
            pending = ""
    return found


def words(command: str) -> list[str]:
    """The arguments after ``sago``, up to a pipe or ``&&``; store URLs as local paths."""
    tokens = shlex.split(command, comments=True)[1:]
    for stop in ("|", "&&", ";"):
        if stop in tokens:
            tokens = tokens[: tokens.index(stop)]
    return [STORE_URL.sub("store/", token) for token in tokens]


CASES = [
    pytest.param(words(command), id=f"{page.relative_to(ROOT)}:{number}")
    for page in PAGES
    for number, command in command_lines(page.read_text(encoding="utf-8"))
]


def test_the_docs_show_command_lines() -> None:
    assert len(CASES) > 40  # the pages are read, not skipped


@pytest.fixture(scope="module")
def parser() -> argparse.ArgumentParser:
    return build_parser()


@pytest.mark.parametrize("argv", CASES)
def test_a_documented_command_line_is_spelled_as_today(argv: list[str]) -> None:
    """The parser reads old spellings too (rewritten first): a page must not teach them."""
    assert modern(argv) == argv, f"an old spelling; today's is: sago {shlex.join(modern(argv))}"


@pytest.mark.parametrize("argv", CASES)
def test_a_documented_command_line_parses(
    argv: list[str], parser: argparse.ArgumentParser, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        parser.parse_args(argv)
    except SystemExit as exc:
        assert exc.code == 0 and "--help" in argv, capsys.readouterr().err
    assert capsys.readouterr().err == ""


def test_output_lines_are_not_commands() -> None:
    text = "```\nsago: error: no run\nsago tracking: not logged\n```\n```text\nsago run\n```"
    assert command_lines(text) == []


def test_a_line_that_no_longer_parses_is_caught(capsys: pytest.CaptureFixture[str]) -> None:
    (argv,) = [words(c) for _, c in command_lines("```\nsago compare paired A B --nope\n```")]
    with pytest.raises(SystemExit):
        build_parser().parse_args(argv)
    assert "unrecognized arguments: --nope" in capsys.readouterr().err
