"""docs/architecture.md names only what exists: every backticked file or folder, module,
``module.name`` / ``Class.member``, called function, ``python -m`` module and ``sago``
command it writes.

The project's Python files are read as syntax (nothing is imported): a name exists when a
module defines or imports it at top level, or a class defines it in its body.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
PACKAGES = ("sago_cli", "bench", "flows", "tasks", "sago_core")
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


def sago_commands(index: Index) -> set[str]:
    tree = ast.parse((ROOT / "sago_cli" / "main.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.AnnAssign | ast.Assign) and isinstance(node.value, ast.Dict):
            return {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
    raise AssertionError("sago_cli/main.py has no COMMANDS table")


def test_every_name_in_the_architecture_doc_exists(index: Index) -> None:
    text = DOC.read_text(encoding="utf-8")
    assert missing_names(text, ROOT, index, sago_commands(index)) == []
    assert len(re.findall(r"`([^`\n]+)`", text)) > 50  # the page is checked, not skipped


def test_the_check_reports_what_does_not_exist(index: Index) -> None:
    """Each kind of name, once present and once missing."""
    commands = sago_commands(index)
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
