"""The documentation site builds, its links resolve, and its reference covers the code.

The site (mkdocs.yml, docs/) is built once, strictly (a warning fails the build: a link to
a missing page or anchor, a page left out of the nav), into a temporary folder. Then every
internal link and anchor of the built pages must resolve; the generated reference must name
every command and option of ``sago_cli.main.build_parser``, every key of the ``RunConfig``
and ``StudyConfig`` JSON schemas and every column of every artifact schema; and every
``sago COMMAND --option`` written in the docs or the README must exist.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
import yaml

from sago_cli.legacy import modern
from sago_cli.main import build_parser
from sago_core.artifacts import layout, schemas
from sago_core.config import RunConfig
from sago_core.study.config import StudyConfig
from tests import browser

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
    """A page's sections (second level and below) by their heading id."""
    found = re.split(r'<h[2-4] id="([^"]+)"', html)
    return dict(zip(found[1::2], found[2::2], strict=True))


def subcommands(
    parser: argparse.ArgumentParser, words: str = ""
) -> dict[str, argparse.ArgumentParser]:
    """Every command and subcommand by its words (``compare paired``)."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found[f"{words} {name}".strip()] = child
                found.update(subcommands(child, f"{words} {name}"))
    return found


def command_of(argv: list[str], commands: dict[str, argparse.ArgumentParser]) -> str | None:
    """The (sub)command an argument list names, old spellings read as today's."""
    words: list[str] = []
    for word in modern(argv):  # a subcommand's words come right after their command's
        if " ".join([*words, word]) not in commands:
            break
        words.append(word)
    return " ".join(words) or None


def test_the_cli_reference_names_every_command_and_option(site: Path) -> None:
    page = sections((site / "reference" / "cli.html").read_text(encoding="utf-8"))
    commands = subcommands(build_parser())
    assert len(commands) >= 10
    for name, parser in commands.items():
        section = page[f"sago-{name.replace(' ', '-')}"]
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue  # a subcommand is checked in its own section
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
        ("study-config", StudyConfig, {"series", "evaluation", "make_series.training.n"}),
    ],
)
def test_the_config_reference_names_every_key(
    site: Path, page_name: str, model: Any, expected: set[str]
) -> None:
    html = (site / "reference" / f"{page_name}.html").read_text(encoding="utf-8")
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
    html = (site / "reference" / "artifacts.html").read_text(encoding="utf-8")
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
                if not rest.startswith(":"):  # "sago tracking: ..." is a line sago prints
                    calls.append((str(path.relative_to(ROOT)), command, rest))
    return calls


def test_every_written_command_and_option_exists() -> None:
    commands = subcommands(build_parser())
    calls = written_calls()
    assert len(calls) >= 20
    wrong = []
    for file, command, rest in calls:
        named = command_of([command, *rest.split()], commands)
        if named is None:
            wrong.append(f"{file}: sago {command}")
            continue
        known = {o for a in commands[named]._actions for o in a.option_strings}
        wrong += [
            f"{file}: sago {named} {option}"
            for option in re.findall(
                r"(?<![\w-])--[a-z][a-z-]*", " ".join(modern([command, *rest.split()]))
            )
            if option not in known
        ]
    assert not wrong, "\n".join(wrong)


def internal_links(site: Path) -> dict[Path, list[str]]:
    """Each built page's links inside the site (no scheme, no protocol-relative host)."""
    return {
        page: [
            link
            for link in parse(page).links
            if not urlsplit(link).scheme and not link.startswith("//")
        ]
        for page in site.rglob("*.html")
    }


def test_every_page_opens_from_disk(site: Path) -> None:
    """Opened from disk (file://), a link to a folder shows a directory listing, not the
    page: every internal link names a file, and the menu reaches every page of the nav."""
    to_folders = [
        f"{page.relative_to(site)}: {link}"
        for page, links in internal_links(site).items()
        for link in links
        if urlsplit(link).path.endswith("/") or urlsplit(link).path in (".", "..")
    ]
    assert not to_folders, "\n".join(to_folders[:20])
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]
    sources = list(nav_pages(nav))
    assert len(sources) >= 25
    menu = {
        (site / urlsplit(link).path).resolve() for link in internal_links(site)[site / "index.html"]
    }
    for source in sources:
        built = (site / source).with_suffix(".html").resolve()
        assert built.is_file(), f"{source} was not built as {built.name}"
        assert built in menu, f"the menu on index.html does not reach {source}"


def nav_pages(node: Any) -> Iterator[str]:
    """Every Markdown page named in mkdocs.yml's nav, depth first."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, list):
        for item in node:
            yield from nav_pages(item)
    elif isinstance(node, dict):
        for value in node.values():
            yield from nav_pages(value)


ISSUE_NUMBER = re.compile(r"\b[Ii]ssues? #?\d+")
CONSTANT_NAME = re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b")
# Pages for developers, where the code's own names are the point.
DEVELOPER_PAGES = {"architecture.html", "guide/development.html"}


def code_constants() -> set[str]:
    """Module-level constants of the project's packages (``DEFAULT_PRESET``, ...)."""
    found = set()
    for package in ("sago_core", "sago_cli", "flows", "tasks"):
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
                targets = node.targets if isinstance(node, ast.Assign) else []
                if isinstance(node, ast.AnnAssign):
                    targets = [node.target]
                found |= {t.id for t in targets if isinstance(t, ast.Name)}
    return {name for name in found if CONSTANT_NAME.fullmatch(name)}


def visible_text(page: Path) -> str:
    markup = re.sub(r"<(script|style)\b.*?</\1>", " ", page.read_text(encoding="utf-8"), flags=re.S)
    return unescape(re.sub(r"<[^>]+>", " ", markup))


def test_user_pages_name_no_issue_numbers_or_code_constants(site: Path) -> None:
    constants = code_constants()
    assert {"DEFAULT_PRESET", "MIN_PROMPTS"} <= constants
    found = []
    for page in sorted(site.rglob("*.html")):
        name = page.relative_to(site).as_posix()
        text = visible_text(page)
        found += [f"{name}: {hit}" for hit in ISSUE_NUMBER.findall(text)]
        if name not in DEVELOPER_PAGES:
            names = set(CONSTANT_NAME.findall(text)) & constants
            found += [f"{name}: {hit}" for hit in sorted(names)]
    assert not found, "\n".join(found)


SEARCH_PROBE = (
    "<script>window.addEventListener('load',()=>{setTimeout(()=>{"
    "const box=document.querySelector('.md-search__input');box.focus();box.value='bertscore';"
    "box.dispatchEvent(new Event('focus'));"
    "box.dispatchEvent(new KeyboardEvent('keyup',{bubbles:true,key:'e'}));"
    "setTimeout(()=>{document.body.setAttribute('data-hits',"
    "String(document.querySelectorAll('.md-search-result__item').length))},4000)},3000)});"
    "</script>"
)


def test_search_works_from_disk_without_the_network(site: Path, tmp_path: Path) -> None:
    """The search box, opened from disk in Chromium with no network, finds pages; no page
    loads a script, style or font from another host."""
    remote = [
        f"{page.relative_to(site)}: {src}"
        for page in site.rglob("*.html")
        for src in re.findall(
            r'<(?:script|link|img)\b[^>]*(?:src|href)="((?:https?:)?//[^"]+)"',
            page.read_text(encoding="utf-8"),
        )
    ]
    assert not remote, "\n".join(remote[:10])
    hits = browser.probe(site / "index.html", SEARCH_PROBE, "hits", tmp_path, budget_ms=15000)
    assert int(hits) >= 1, "the search box found nothing from disk"


def test_the_index_and_getting_started_list_every_tutorial_and_guide() -> None:
    pages = {
        path.relative_to(ROOT / "docs").as_posix()
        for folder in ("tutorials", "guide")
        for path in (ROOT / "docs" / folder).glob("*.md")
    }
    for name in ("index.md", "getting-started.md"):
        text = (ROOT / "docs" / name).read_text(encoding="utf-8")
        linked = set(re.findall(r"\]\(((?:tutorials|guide)/[^)#]+)", text))
        assert pages - linked == set(), f"not linked from docs/{name}: {sorted(pages - linked)}"


def test_the_readme_is_a_front_door() -> None:
    """The README links every tutorial and guide page, names `sago site`, and its example
    creates the file it then runs on; the benchmark tables live in the performance guide."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\((docs/[^)#]+)", readme))
    pages = {
        path.relative_to(ROOT).as_posix()
        for folder in ("docs/tutorials", "docs/guide")
        for path in (ROOT / folder).glob("*.md")
    }
    assert pages - linked == set(), f"not linked from the README: {sorted(pages - linked)}"
    assert "sago site" in readme
    for dataset in re.findall(r"--datasets (\S+\.jsonl)", readme):
        assert f"cat > {dataset} <<" in readme, f"the README runs on {dataset} but never writes it"
    assert "| stage |" not in readme, "the per-stage table belongs in docs/guide/performance.md"
