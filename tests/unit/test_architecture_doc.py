"""docs/architecture.md names only what exists: every backticked file or folder, module,
``module.name`` / ``Class.member``, called function, ``python -m`` module and ``sago``
command it writes. And it names everything: every package (a folder with ``__init__.py`` at
the top or under sago_core/, flows/, tasks/ and sago_cli/) is a room of its tree, and every
command of the parser a row of its table of commands, and the other way round.

The project's Python files are read as syntax (nothing is imported): a name exists when a
module defines or imports it at top level, or a class defines it in its body.
"""

from __future__ import annotations

import argparse
import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
PACKAGES = ("sago_cli", "sago", "bench", "flows", "tasks", "sago_core")
# Folders whose every package the tree names (with the top-level packages).
ROOMS_BELOW = ("sago_core", "flows", "tasks", "sago_cli")
DATA_SUFFIXES = {"md", "html", "json", "jsonl", "parquet", "yaml", "yml", "csv", "toml", "db"}
IDENTIFIER = r"[A-Za-z_]\w*"
DOTTED = re.compile(rf"^{IDENTIFIER}(\.{IDENTIFIER})+$")
CALL = re.compile(rf"^({IDENTIFIER}(?:\.{IDENTIFIER})*)\(.*\)$")
CLASS_OR_CONSTANT = re.compile(r"^(?:[A-Z][a-z]\w*|[A-Z][A-Z0-9_]+)$")


@dataclass
class Index:
    """What the project's modules define: module -> names, (module, class) -> members."""

    names: dict[str, set[str]] = field(default_factory=dict)
    members: dict[tuple[str, str], set[str]] = field(default_factory=dict)

    def modules_named(self, short: str) -> list[str]:
        return [m for m in self.names if m.rsplit(".", 1)[-1] == short]

    def classes_named(self, name: str) -> list[tuple[str, str]]:
        return [key for key in self.members if key[1] == name]

    def resolves(self, module: str, rest: list[str]) -> bool:
        """``rest`` (a name, or a class and its member) exists in ``module``."""
        if not rest:
            return True
        if rest[0] not in self.names[module]:
            return False
        if len(rest) == 1:
            return True
        members = self.members.get((module, rest[0]))
        return members is not None and rest[1] in members

    def dotted_exists(self, token: str) -> bool:
        parts = token.split(".")
        for cut in range(len(parts), 0, -1):  # the longest module prefix
            module = ".".join(parts[:cut])
            if module in self.names:
                return self.resolves(module, parts[cut:])
        first, rest = parts[0], parts[1:]
        if any(self.resolves(m, rest) for m in self.modules_named(first)):
            return True  # `layout.default_prefect_home`
        return any(rest[0] in self.members[key] for key in self.classes_named(first))

    def name_exists(self, name: str) -> bool:
        return any(name in names for names in self.names.values()) or any(
            name in members for members in self.members.values()
        )


def _top_level(tree: ast.Module) -> tuple[set[str], dict[str, set[str]]]:
    names: set[str] = set()
    classes: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            classes[node.name] = _assigned(node.body) | {
                n.name for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
            }
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names | _assigned(tree.body), classes


def _assigned(body: list[ast.stmt]) -> set[str]:
    found = set()
    for node in body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        found |= {t.id for t in targets if isinstance(t, ast.Name)}
    return found


def build_index(root: Path) -> Index:
    index = Index()
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            names, classes = _top_level(ast.parse(path.read_text(encoding="utf-8")))
            children = {p.stem for p in path.parent.iterdir()} if parts[-1] == "__init__" else set()
            index.names[module] = names | children  # a package's submodules are its names
            for name, members in classes.items():
                index.members[(module, name)] = members
    return index


def path_exists(root: Path, token: str) -> bool:
    candidates = [root / token, *(root / package / token for package in PACKAGES)]
    return any(c.exists() for c in candidates)


def missing_names(text: str, root: Path, index: Index, commands: set[str]) -> list[str]:
    """The backticked names of ``text`` that do not exist (each with why)."""
    missing = []
    for token in re.findall(r"`([^`\n]+)`", text):
        problem = check_token(token.strip(), root, index, commands)
        if problem:
            missing.append(f"`{token}`: {problem}")
    return missing


def check_token(token: str, root: Path, index: Index, commands: set[str]) -> str | None:
    if token.startswith("python -m "):
        module = token.split()[2]
        return None if module in index.names else f"no module {module}"
    if token.startswith("sago "):
        command = token.split()[1]
        if command.startswith("-"):
            return None  # an option of sago itself (`sago --help`)
        return None if command in commands else f"no sago command {command}"
    if " " in token or any(c in token for c in "<>{}*:|"):
        return None  # prose, a pattern or a placeholder
    if "/" in token or token.endswith(".py") or token in (".importlinter",):
        if token.startswith(("runs/", "../")):
            return None
        return None if path_exists(root, token.rstrip("/")) else "no such file or folder"
    if token.rsplit(".", 1)[-1] in DATA_SUFFIXES:
        return None  # an artifact's file name
    called = CALL.match(token)
    if called:
        name = called.group(1)
        found = index.dotted_exists(name) if "." in name else index.name_exists(name)
        return None if found else f"no function {name}"
    if DOTTED.match(token):
        return None if index.dotted_exists(token) else "no such module or name"
    if CLASS_OR_CONSTANT.match(token):
        return None if index.name_exists(token) else "no such class or constant"
    return None


@pytest.fixture(scope="module")
def index() -> Index:
    return build_index(ROOT)


@pytest.fixture(scope="module")
def commands() -> set[str]:
    """The top-level commands, from the parser ``sago`` itself builds."""
    from sago_cli.main import build_parser

    parser = build_parser()
    found = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert len(found) == 1, "the parser has one set of subcommands"
    return set(found[0].choices)


def test_every_name_in_the_architecture_doc_exists(index: Index, commands: set[str]) -> None:
    text = DOC.read_text(encoding="utf-8")
    assert missing_names(text, ROOT, index, commands) == []
    assert len(re.findall(r"`([^`\n]+)`", text)) > 50  # the page is checked, not skipped


def test_the_check_reports_what_does_not_exist(index: Index, commands: set[str]) -> None:
    """Each kind of name, once present and once missing."""
    present = [
        "`sago_core/artifacts/layout.py`",
        "`flows/runtime/`",
        "`stages/analysis.py`",
        "`sago_core.artifacts.layout.RunLayout`",
        "`layout.default_prefect_home`",
        "`RunLayout.leases_key`",
        "`open_backend(target, places, key)`",
        "`python -m flows.runtime.device_worker MODULE:FLOW PAYLOAD`",
        "`sago resume`",
        "`RunConfig`",
    ]
    absent = [
        "`sago_core/artifacts/nowhere.py`",
        "`flows/cli.py`",
        "`flows/device_worker.py`",
        "`sago_core.artifacts.layout.NoSuchLayout`",
        "`layout.no_such_function`",
        "`RunLayout.no_such_member`",
        "`no_such_function(x)`",
        "`python -m flows.cli`",
        "`sago no-such-command`",
        "`NoSuchClass`",
    ]
    assert missing_names(" ".join(present), ROOT, index, commands) == []
    found = missing_names(" ".join(absent), ROOT, index, commands)
    assert [entry.split("`")[1] for entry in found] == [a.strip("`") for a in absent]


TREE = re.compile(r"^## Rooms, and who may import whom\n+```\n(.*?)^```", re.S | re.M)
# A room's line: its folder name at the indent of its depth (two spaces a level, at most
# two levels down); a description's continuation lines are indented further.
ROOM = re.compile(r"^((?:  ){0,2})([A-Za-z_]\w*)/(?=\s|$)")
COMMAND_ROW = re.compile(r"^\| `sago ([\w-]+)` \|", re.M)


def rooms(text: str) -> set[str]:
    """The folders of the doc's tree of rooms, as paths from the repository root."""
    found = TREE.search(text)
    assert found, "docs/architecture.md has no tree under 'Rooms, and who may import whom'"
    path: list[str] = []
    folders = set()
    for line in found.group(1).splitlines():
        room = ROOM.match(line)
        depth = len(room.group(1)) // 2 if room else -1
        if room and depth <= len(path):
            path[depth:] = [room.group(2)]
            folders.add("/".join(path))
    return folders


def packages(root: Path) -> set[str]:
    """Every top-level package, and every package under the folders of ``ROOMS_BELOW``."""
    found = {p.parent.name for p in root.glob("*/__init__.py")}
    for top in ROOMS_BELOW:
        for init in (root / top).rglob("__init__.py"):
            if "__pycache__" not in init.parts:
                found.add(init.parent.relative_to(root).as_posix())
    return found


def listed_commands(text: str) -> set[str]:
    section = text.split("\n## The commands\n", 1)
    assert len(section) == 2, "docs/architecture.md has no section 'The commands'"
    return set(COMMAND_ROW.findall(section[1].split("\n## ", 1)[0]))


def test_every_package_is_a_room_and_every_room_a_folder() -> None:
    named = rooms(DOC.read_text(encoding="utf-8"))
    assert sorted(packages(ROOT) - named) == [], "packages the doc's tree does not name"
    assert sorted(f for f in named if not (ROOT / f).is_dir()) == [], "rooms that do not exist"


def test_every_command_is_a_row_and_every_row_a_command(commands: set[str]) -> None:
    listed = listed_commands(DOC.read_text(encoding="utf-8"))
    assert sorted(commands - listed) == [], "commands the doc's table does not list"
    assert sorted(listed - commands) == [], "rows of the doc's table that are no command"


def test_the_tree_and_the_table_are_read_as_written() -> None:
    """Nested rooms become paths; a description's indented words are no room; a table row is
    read only inside its section."""
    text = """## Rooms, and who may import whom

```
top/         a package: pkg/ (in words, not a room)
  inner/       one level down
    deep/        two levels down
                 continued/ (a description)
other/       beside it
```

## The commands

| `sago alpha` | a | b |
| `sago beta-gamma` | a | b |

## After

| `sago not-a-row` | a | b |
"""
    assert rooms(text) == {"top", "top/inner", "top/inner/deep", "other"}
    assert listed_commands(text) == {"alpha", "beta-gamma"}
