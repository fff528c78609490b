"""The glossary (docs/glossary.md) names every command and subcommand, every top-level key
of the run configuration and every artifact of a run folder, each in a row of its own; a new
one without an entry fails here."""

from __future__ import annotations

import argparse
from pathlib import Path

from sago_cli.main import build_parser
from sago_core.artifacts import layout
from sago_core.config import RunConfig

GLOSSARY = Path(__file__).resolve().parents[2] / "docs" / "glossary.md"


def command_names(parser: argparse.ArgumentParser, words: str = "sago") -> list[str]:
    """``sago run``, ``sago compare paired``, ...: every command and subcommand."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found.append(f"{words} {name}")
                found.extend(command_names(child, f"{words} {name}"))
    return found


def artifact_names() -> list[str]:
    """The file names ``RunLayout``'s module declares for a run folder."""
    names = [getattr(layout, n) for n in dir(layout) if n.endswith("_FILE")]
    names += [layout.RUN_CONFIG, layout.MANIFEST, layout.API_LEDGER, layout.INTEGRITY_LOG]
    return sorted(set(names))


def missing(text: str, names: list[str]) -> list[str]:
    """The names with no table row of their own (a row opens ``| `name` |``)."""
    return [name for name in names if f"| `{name}` |" not in text]


def test_every_command_has_an_entry() -> None:
    names = command_names(build_parser())
    assert "sago compare paired" in names and "sago audit refusal" in names
    assert missing(GLOSSARY.read_text(encoding="utf-8"), names) == []


def test_every_configuration_key_has_an_entry() -> None:
    keys = list(RunConfig.model_fields)
    assert "generation" in keys and "budget" in keys
    assert missing(GLOSSARY.read_text(encoding="utf-8"), keys) == []


def test_every_artifact_has_an_entry() -> None:
    names = artifact_names()
    assert "deltas.parquet" in names and "run_config.json" in names
    assert missing(GLOSSARY.read_text(encoding="utf-8"), names) == []


def test_the_check_finds_a_name_without_a_row() -> None:
    text = "| `sago run` | evaluate |\nwe mention `sago resume` in prose only\n"
    assert missing(text, ["sago run", "sago resume", "sago nothing"]) == [
        "sago resume",
        "sago nothing",
    ]
