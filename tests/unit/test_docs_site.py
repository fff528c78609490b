"""The documentation site builds, its links resolve, and its reference covers the code.

The site (mkdocs.yml, docs/) is built once, strictly (a warning fails the build: a link to
a missing page or anchor, a page left out of the nav), into a temporary folder. Then every
internal link and anchor of the built pages must resolve; the generated reference must name
every command and option of ``sago_cli.main.build_parser``, every key of the ``RunConfig``
and ``ConsistencyConfig`` JSON schemas and every column of every artifact schema; and every
``sago COMMAND --option`` written in the docs or the README must exist.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

from sago_cli.main import build_parser
from sago_core.artifacts import layout, schemas
from sago_core.config import RunConfig
from sago_core.consistency.config import ConsistencyConfig

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    return out


class Page(HTMLParser):
    """The links (href/src) and element ids of one built page."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name in ("href", "src"):
                self.links.append(value)
            elif name == "id":
                self.ids.add(value)


def parse(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def target_file(site: Path, page: Path, path: str) -> Path:
    target = (page.parent / unquote(path)).resolve() if path else page
    if target.is_dir():
        target = target / "index.html"
    assert target.is_relative_to(site.resolve()), f"{page}: {path} leaves the site"
    return target


def test_every_internal_link_and_anchor_resolves(site: Path) -> None:
    pages = {p.resolve(): parse(p) for p in site.rglob("*.html") if p.name != "404.html"}
    assert len(pages) >= 15
    broken = []
    for page, parsed in pages.items():
        for link in parsed.links:
            parts = urlsplit(link)
            if parts.scheme or link.startswith("//"):
                continue  # external (the docs name no external assets: font: false)
            target = target_file(site, page, parts.path)
            if not target.exists():
                broken.append(f"{page.relative_to(site.resolve())}: {link}")
            elif parts.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else parse(target).ids
                if unquote(parts.fragment) not in ids:
                    broken.append(f"{page.relative_to(site.resolve())}: {link} (no such anchor)")
    assert not broken, "\n".join(broken)


def sections(html: str) -> dict[str, str]:
    """A page's second-level sections by their heading id."""
    found = re.split(r'<h2 id="([^"]+)"', html)
    return dict(zip(found[1::2], found[2::2], strict=True))


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("sago has no subcommands")


def test_the_cli_reference_names_every_command_and_option(site: Path) -> None:
    page = sections((site / "reference" / "cli" / "index.html").read_text(encoding="utf-8"))
    commands = subcommands(build_parser())
    assert len(commands) >= 10
    for name, parser in commands.items():
        section = page[f"sago-{name}"]
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            for option in action.option_strings or [action.dest]:
                assert f"<code>{option}" in section, f"sago {name}: {option} is not documented"


def config_paths(schema: dict[str, Any], defs: dict[str, Any], prefix: str = "") -> list[str]:
    """Every key of the schema, nested sections' keys as dotted paths."""
    paths = []
    for key, prop in schema.get("properties", {}).items():
        paths.append(prefix + key)
        for option in prop.get("anyOf", [prop]):
            ref = option.get("$ref")
            if ref:
                nested = defs[ref.rsplit("/", 1)[-1]]
                paths += config_paths(nested, defs, f"{prefix}{key}.")
    return paths


@pytest.mark.parametrize(
    ("page_name", "model", "expected"),
    [
        ("config", RunConfig, {"models", "datasets", "generation.max_new_tokens"}),
        ("study-config", ConsistencyConfig, {"families", "evaluation", "series.training.n"}),
    ],
)
def test_the_config_reference_names_every_key(
    site: Path, page_name: str, model: Any, expected: set[str]
) -> None:
    html = (site / "reference" / page_name / "index.html").read_text(encoding="utf-8")
    schema = model.model_json_schema()
    for key in schema["properties"]:
        top_level = sections(html)["top-level-keys"]
        assert f"<code>{key}</code>" in top_level, f"{key} is not documented"
    defs = schema.get("$defs", {})
    # A run configuration inside another (the study's evaluation) is documented on its own page.
    paths = [p for p in config_paths(schema, defs) if not p.startswith("evaluation.")]
    assert expected <= set(paths)
    missing = [path for path in paths if f"<code>{path}</code>" not in html]
    assert not missing, f"config keys not documented: {missing}"


def test_the_artifact_reference_names_every_column(site: Path) -> None:
    html = (site / "reference" / "artifacts" / "index.html").read_text(encoding="utf-8")
    declared = {
        name: value
        for name, value in vars(schemas).items()
        if name.isupper() and isinstance(value, dict) and name != "VARIANT_KEY"
    }
    declared["INSTANCES"] = schemas.instances_schema()
    assert len(declared) >= 15
    for name, columns in declared.items():
        file_name = getattr(layout, f"{name}_FILE")
        part = re.split(rf'<h3 id="[^"]*"><code>{re.escape(file_name)}</code>', html, maxsplit=1)
        assert len(part) == 2, f"{file_name} has no section"
        section = part[1].split("<h3", 1)[0]
        for column in columns:
            assert f"<code>{column}</code>" in section, f"{file_name}: {column} not documented"


SAGO_CALL = re.compile(r"(?<![\w/.-])sago ([a-z][a-z-]*)([^\n`|#;&]*)")


def written_calls() -> list[tuple[str, str, str]]:
    """(file, command, the rest of its line) for each ``sago COMMAND ...`` in code."""
    calls = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = path.read_text(encoding="utf-8").replace("\\\n", " ")
        lines = []
        for block in re.findall(r"```[^\n]*\n(.*?)```", text, flags=re.DOTALL):
            lines += [re.sub(r"(^|\s)#.*", "", line) for line in block.splitlines()]
        prose = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
        lines += [span.replace("\n", " ") for span in re.findall(r"`([^`]+)`", prose)]
        for line in lines:
            for command, rest in SAGO_CALL.findall(line):
                calls.append((str(path.relative_to(ROOT)), command, rest))
    return calls


def test_every_written_command_and_option_exists() -> None:
    commands = subcommands(build_parser())
    calls = written_calls()
    assert len(calls) >= 20
    wrong = []
    for file, command, rest in calls:
        if command not in commands:
            wrong.append(f"{file}: sago {command}")
            continue
        known = {o for a in commands[command]._actions for o in a.option_strings}
        wrong += [
            f"{file}: sago {command} {option}"
            for option in re.findall(r"(?<![\w-])--[a-z][a-z-]*", rest)
            if option not in known
        ]
    assert not wrong, "\n".join(wrong)
