"""Code, comments, docstrings, messages and docs read without the project's history: no issue
numbers ("(issue 16)", "issues 40, 44", "#44") and no pointers to documents that are not in the
repository ("seed 003", "spec section 8"). A why-comment says the why; the history lives in
git. The patterns are narrow on purpose: a CSS colour (``#222``), an HTML entity (``&#39;``),
``<task>#2`` or "issue" as a plain word ("issue a warning") pass."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = (
    "sago",
    "sago_core",
    "flows",
    "tasks",
    "sago_cli",
    "deployments",
    "bench",
    "docs",
    "examples",
    "tests",
    ".ci",
)
TOP_FILES = ("README.md", "pyproject.toml", "Makefile", "Dockerfile", "mkdocs.yml")
# Text a person writes; data (Parquet, CSV, the fixtures' JSON from other tools) is not read.
TEXT_SUFFIXES = frozenset(
    {".py", ".md", ".yaml", ".yml", ".toml", ".cfg", ".ini", ".sh", ".txt", ".html", ".css", ".js"}
)
# Fixtures reproduce other tools' files as they are; only what we write about them is read.
FIXTURE_SUFFIXES = frozenset({".py", ".md"})
SKIPPED_PARTS = frozenset({"__pycache__", "node_modules"})
THIS_FILE = Path(__file__).resolve()

# Each pattern with what it catches; matched case-insensitively.
PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("an issue number", re.compile(r"(?<![a-z])issues?[-_ ]?#?\d+", re.I)),
    ("an issue number", re.compile(r"\bgh-\d+\b", re.I)),
    # "#44" after a space, "(" or "[" (a colour after "color:" is filtered below).
    ("an issue number", re.compile(r"(?:^|(?<=[\s(\[]))#\d{1,5}\b(?![\w-])")),
    ("a pointer to an issue", re.compile(r"\bissue's\b|\bthis issue\b", re.I)),
    (
        "a pointer to an issue",
        re.compile(r"\bthe issue (?:asks|calls|says|wants|requires)\b", re.I),
    ),
    ("a document outside the repository", re.compile(r"\bseed[-_ ]?0\d\d\b", re.I)),
    ("a document outside the repository", re.compile(r"\bSAGO_SPEC\b", re.I)),
    (
        "a document outside the repository",
        re.compile(
            r"\bspec(?:ification)?(?:'s)?\s+section\b|\bsection\s+\d+\s+of\s+the\s+spec", re.I
        ),
    ),
    (
        "a document outside the repository",
        re.compile(
            r"\bthe spec (?:states|fixes|says|defines|asks|requires)\b|\bof the spec\b", re.I
        ),
    ),
    ("a document outside the repository", re.compile(r"\bhouse[- ]plan\b", re.I)),
)
# The colour "#222" of a CSS declaration ("color: #222"): a hex value after a colon or a comma.
CSS_VALUE = re.compile(r"[:,]\s*$")

# Files still to clean, each named exactly (empty when done).
NOT_YET_CLEAN: frozenset[str] = frozenset()


def scanned_files() -> Iterator[Path]:
    for name in TOP_FILES:
        if (ROOT / name).is_file():
            yield ROOT / name
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*")):
            parts = set(path.relative_to(ROOT).parts)
            if not path.is_file() or parts & SKIPPED_PARTS or path.resolve() == THIS_FILE:
                continue
            suffixes = FIXTURE_SUFFIXES if "fixtures" in parts else TEXT_SUFFIXES
            if path.suffix in suffixes or (path.suffix == "" and path.parent.name == ".ci"):
                yield path


def line_hits(line: str) -> Iterator[tuple[str, str]]:
    """(what, the text matched) for each pattern found in one line."""
    for what, pattern in PATTERNS:
        for match in pattern.finditer(line):
            if match.group(0).startswith("#") and CSS_VALUE.search(line[: match.start()]):
                continue
            yield what, match.group(0)


def findings(path: Path) -> Iterator[str]:
    name = path.relative_to(ROOT).as_posix()
    text = path.read_text(encoding="utf-8", errors="replace")
    for number, line in enumerate(text.splitlines(), start=1):
        for what, matched in line_hits(line):
            yield f"{name}:{number}: {what} ({matched!r}): {line.strip()[:120]}"


def test_no_issue_numbers_or_outside_documents() -> None:
    found = [
        hit
        for path in scanned_files()
        if path.relative_to(ROOT).as_posix() not in NOT_YET_CLEAN
        for hit in findings(path)
    ]
    assert not found, "say the why in plain words instead:\n" + "\n".join(found)


def test_every_file_still_to_clean_exists_and_still_needs_it() -> None:
    stale = [name for name in NOT_YET_CLEAN if not any(findings(ROOT / name))]
    assert not stale, f"clean now, drop from NOT_YET_CLEAN: {stale}"


def test_the_patterns_catch_what_they_are_for_and_pass_plain_text() -> None:
    flagged = [
        "# the demo (issue 16)",
        "see issues 40, 44",
        "fixed in #44 last week",
        "(#12)",
        "a run before issue-16",
        "def test_before_issue_16(): ...",
        "the issue's bound",
        "as before this issue",
        "the issue asks for 10 s",
        "(seed 003)",
        "R_X of spec section 4",
        "SAGO_SPEC section 10",
        "the spec states the halves",
        "the one-sided tests of the spec",
    ]
    plain = [
        "body{color:#222}",
        ".na { color: #777; }",
        "a gradient: #fff, #000",
        "it&#39;s",
        "`lm-eval:<task>#2`, a template variant",
        "the backend may issue a warning",
        "issues a request per prompt",
        "# 1. first, the base",
        "seed 0, seed 11",
        "the judge's spec and identity",
        "the model spec prefix",
        "tissue 3",
    ]
    assert [text for text in flagged if not any(line_hits(text))] == []
    assert [(text, list(line_hits(text))) for text in plain if any(line_hits(text))] == []
