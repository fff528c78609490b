"""CLI manners: every option has help, help shows defaults, a mistyped command or choice gets
a suggestion, an output name whose suffix contradicts the format written is refused."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from sago_cli.main import build_parser, main
from sago_core.config import PRESETS


def command_parsers() -> dict[str, argparse.ArgumentParser]:
    """Every command and subcommand's parser, by its words (``compare paired``)."""
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, words: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    found[f"{words} {name}".strip()] = child
                    walk(child, f"{words} {name}")

    walk(build_parser(), "")
    return found


def test_every_option_of_every_command_has_help() -> None:
    missing = [
        f"{name} {action.option_strings or action.dest}"
        for name, parser in command_parsers().items()
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction) and not action.help
    ]
    assert missing == []


def test_help_shows_defaults_and_the_presets_values(capsys: pytest.CaptureFixture[str]) -> None:
    parsers = command_parsers()
    audit = " ".join(parsers["audit judge"].format_help().split())
    assert "(default: judge_audit.csv)" in audit
    assert "(default: 0.1)" in audit
    run = " ".join(parsers["run"].format_help().split())
    for name, preset in PRESETS.items():
        assert f"{name} {preset.n}," in run or f"{name} {preset.n})" in run
    assert "(default: None)" not in run  # an override without a default of its own says so
    assert "shared/data" not in run  # nothing a user reads points outside the repository


@pytest.mark.parametrize(
    ("argv", "suggestion"),
    [
        (["rnu"], "did you mean 'run'?"),
        (["run", "--preset", "demoo"], "did you mean 'demo'?"),
        (["series", "quantise", "--out", "x"], "did you mean 'quantize'?"),
        (["checkpoints", "quantise", "--out", "x"], "did you mean 'quantize'?"),  # old spelling
        (["compare", "pared", "A", "B"], "did you mean 'paired'?"),
    ],
)
def test_a_mistyped_choice_gets_a_suggestion(
    argv: list[str], suggestion: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert suggestion in capsys.readouterr().err


def test_no_suggestion_for_a_choice_far_from_every_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["xyzzy"])
    err = capsys.readouterr().err
    assert "invalid choice: 'xyzzy'" in err and "did you mean" not in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["compare", "paired", "A", "B", "--out", "cmp.html"], "must end in .parquet"),
        (["compare", "page", "A", "B", "--out", "cmp.parquet"], "must end in .html"),
        (["compare", "A", "B", "--paired", "--out", "cmp.html"], "must end in .parquet"),
        (["export", "generations", "RUN", "--out", "gen.txt"], "must end in .csv or .jsonl"),
        (["export", "RUN", "--out", "gen.txt"], "must end in .csv or .jsonl or .parquet"),
        (["audit", "judge", "export", "RUN", "--out", "labels.xlsx"], "must end in .csv"),
        (["judge-audit", "export", "RUN", "--out", "labels.xlsx"], "must end in .csv"),
    ],
)
def test_an_output_name_that_contradicts_the_format_is_refused(
    argv: list[str],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse refuses the argument itself
        code = exc.code  # type: ignore[assignment]
    assert code == 2
    assert message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # nothing written under the wrong name
