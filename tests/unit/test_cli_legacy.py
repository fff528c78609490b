"""The command line's shape: ``sago --help`` lists every command once, by group, one line
each; every old spelling parses to exactly what its new spelling parses to (so a script
written against the flat commands keeps its meaning); the shared options are spelled alike."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from sago_cli.legacy import modern
from sago_cli.main import COMMANDS, GROUPS, build_parser

# (old spelling, today's spelling): the same meaning, word for word.
OLD_AND_NEW = [
    (
        ["consistency", "--config", "s.yaml", "--dry-run"],
        ["study", "--config", "s.yaml", "--dry-run"],
    ),
    (
        ["checkpoints", "quantize", "--base", "smollm2-135m", "--out", "q"],
        ["series", "quantize", "--model", "smollm2-135m", "--out", "q"],
    ),
    (
        ["checkpoints", "quantize", "--base=smollm2-135m", "--out", "q"],
        ["series", "quantize", "--model=smollm2-135m", "--out", "q"],
    ),
    (["plan", "R", "--budget", "0.5"], ["design", "R", "--budget", "0.5"]),
    (
        ["judge-audit", "export", "R", "--share", "0.2"],
        ["audit", "judge", "export", "R", "--share", "0.2"],
    ),
    (["compare", "A", "B", "--out", "c.html"], ["compare", "page", "A", "B", "--out", "c.html"]),
    (
        ["compare", "A", "B", "--paired", "--margin", "0.1"],
        ["compare", "paired", "A", "B", "--margin", "0.1"],
    ),
    (
        ["compare", "--transfer", "A", "B", "--split", "s.json"],
        ["compare", "transfer", "A", "B", "--split", "s.json"],
    ),
    (["export", "R", "--out", "g.csv"], ["export", "generations", "R", "--out", "g.csv"]),
    (
        ["export", "R", "--format", "hf-dataset", "--out", "ds", "--license", "mit"],
        ["export", "dataset", "R", "--out", "ds", "--license", "mit"],
    ),
    (
        ["export", "R", "--format", "inspect", "--out", "logs"],
        ["export", "inspect", "R", "--out", "logs"],
    ),
    (
        ["export", "R", "--format=hf-results", "--out", "res", "--push", "me/res"],
        ["export", "hf-results", "R", "--out", "res", "--push", "me/res"],
    ),
    (
        ["export", "R", "--training", "sft", "--training", "dpo", "--out", "d"],
        ["export", "training", "R", "--kind", "sft", "--kind", "dpo", "--out", "d"],
    ),
    (
        ["export", "R", "--training=sft", "--out", "d"],
        ["export", "training", "R", "--kind=sft", "--out", "d"],
    ),
    (
        ["export", "training", "R", "--kind", "pairs", "--kind=sft", "--out", "d"],
        ["export", "training", "R", "--kind", "consistency", "--kind=sft", "--out", "d"],
    ),
    (
        ["score", "--generations", "a.csv", "--family", "noise"],
        ["score", "a.csv", "--family", "noise"],
    ),
    (
        ["score", "--family", "noise", "--generations=a.csv"],
        ["score", "a.csv", "--family", "noise"],
    ),
]


@pytest.fixture(scope="module")
def parser() -> argparse.ArgumentParser:
    return build_parser()


@pytest.mark.parametrize(("old", "new"), OLD_AND_NEW, ids=lambda argv: " ".join(argv[:2]))
def test_an_old_spelling_means_what_its_new_one_means(
    old: list[str], new: list[str], parser: argparse.ArgumentParser
) -> None:
    notes: list[str] = []
    assert modern(old, notes.append) == new
    assert len(notes) == 1 and "is now" in notes[0]  # one line naming the new spelling
    assert vars(parser.parse_args(old)) == vars(parser.parse_args(new))


# (old spelling, what it must parse to, written out by hand): the rewrite above is checked
# against today's parser, not only against itself.
OLD_AND_MEANING = [
    (
        ["compare", "A", "B", "--paired", "--margin", "0.1"],
        {"command": "compare", "mode": "paired", "runs": [Path("A"), Path("B")], "margin": 0.1},
    ),
    (
        ["checkpoints", "quantize", "--base=smollm2-135m", "--out", "q"],
        {"command": "series", "kind": "quantize", "model": "smollm2-135m", "out": Path("q")},
    ),
    (
        ["export", "R", "--training=sft", "--training", "dpo", "--out", "d"],
        {"command": "export", "mode": "training", "run": Path("R"), "kind": ["sft", "dpo"]},
    ),
    (
        ["export", "R", "--format", "inspect", "--out", "logs"],
        {"command": "export", "mode": "inspect", "run": Path("R"), "out": Path("logs")},
    ),
    (
        ["score", "--family", "noise", "--generations=a.csv"],
        {"command": "score", "generations": Path("a.csv"), "family": "noise"},
    ),
    (
        ["plan", "R", "--budget", "0.5", "--top", "3"],
        {"command": "design", "run": Path("R"), "top": 3},
    ),
]


@pytest.mark.parametrize(("old", "meaning"), OLD_AND_MEANING, ids=lambda v: str(v)[:30])
def test_an_old_spelling_parses_to_its_meaning_and_says_the_new_one(
    old: list[str],
    meaning: dict[str, object],
    parser: argparse.ArgumentParser,
    capsys: pytest.CaptureFixture[str],
) -> None:
    parsed = vars(parser.parse_args(old))
    assert {key: parsed.get(key) for key in meaning} == meaning
    (line,) = capsys.readouterr().err.splitlines()  # one line, on stderr
    assert line.startswith("sago: `sago ") and " is now `sago " in line


def test_today_s_spellings_are_left_alone() -> None:
    for _, new in OLD_AND_NEW:
        notes: list[str] = []
        assert modern(new, notes.append) == new and notes == []


def test_help_lists_every_command_once_by_group(
    parser: argparse.ArgumentParser, capsys: pytest.CaptureFixture[str]
) -> None:
    grouped = [name for _, names in GROUPS for name in names]
    assert sorted(grouped) == sorted(COMMANDS)  # every command in exactly one group
    with pytest.raises(SystemExit):
        parser.parse_args(["--help"])
    text = capsys.readouterr().out
    for title, names in GROUPS:
        assert f"\n{title}:\n" in text
        for name in names:
            (line,) = [ln for ln in text.splitlines() if ln.startswith(f"  {name} ")]
            assert len(line) <= 100
    for old in ("consistency", "checkpoints", "plan", "judge-audit"):
        assert f"  {old} " not in text  # old spellings work but are not advertised


def _options(parser: argparse.ArgumentParser, words: str = "") -> dict[str, set[str]]:
    """Each (sub)command's option strings."""
    found: dict[str, set[str]] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found.update(_options(child, f"{words} {name}".strip()))
        else:
            found.setdefault(words, set()).update(action.option_strings)
    return found


def test_an_output_a_model_and_a_budget_are_spelled_alike(parser: argparse.ArgumentParser) -> None:
    """No command names its output, its model or its budget any other way."""
    every = set().union(*_options(parser).values())
    assert {"--out", "--model", "--models", "--budget"} <= every
    retired = {"--json", "--base", "--generations", "--paired", "--transfer", "--training"}
    assert every & retired == set()


def test_a_budget_count_is_refused_by_run_in_one_line_naming_design(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--budget`` parses alike everywhere; ``sago run`` takes a share of the grid, so a
    count of generations (``sago design``'s other form) is refused, never read as a share."""
    from sago_cli.main import main

    assert main(["run", "--budget", "64", "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "sago design" in err
