"""Content-addressed cache keys for stage tasks.

A key is the hash of what determines a stage's output and where it goes: the task name, the
code version of that task (see ``code_version``), every input artifact's bytes (parameters
named ``*_path`` or ``*_paths``), every other parameter's JSON form, and the place the stage
writes to (``out_dir``) relative to its run folder, except where shared caches live
(``cache_dir``) or where spending is booked (``ledger_file``), and, of a ``ModelTarget``,
everything but where its weights lie. Never the run id or the run folder's absolute path: a
rerun or a resumed run hits the cache, and so does a run folder moved elsewhere.

The place is in the key because two stages can read equal bytes with equal parameters and
still write different files: the run-level ``assemble[generations]`` of a one-model,
one-shard run reads bytes equal to the model-level one's input. Without its place it would
get the model-level result, and the run folder would lack its own ``generations.parquet``.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel

import sago_core
from sago.tasks.module_facts import FactsMemo, ModuleFacts, memo_file, reader_of
from sago_core.artifacts.store import sha256_of
from sago_core.backends.target import ModelTarget, cache_fingerprint

# Where the import names start: the repository's root, or site-packages once installed
# (``sago.tasks`` is the ``tasks`` folder seen from inside the ``sago`` name space).
ROOT = Path(sago_core.__file__).resolve().parent.parent
OWN_PACKAGES = ("sago_core", "sago.tasks")
_EXCLUDED = frozenset({"out_dir", "cache_dir", "ledger_file"})
OUTPUT_PLACE = "out_dir"
# The registries name code as "package.module:function", imported where it is resolved: a
# module that resolves a registry's references (builds a backend, computes the deltas)
# depends on the code they name; one that only reads a registry (its names, scales) does not.
LAZY_REFERENCE = re.compile(r"([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+):[A-Za-z_]\w*")
RESOLVERS = {
    "sago_core.backends.factory": "sago_core.registry.backends",
    "sago_core.scoring.deltas": "sago_core.registry.axes",
}


def _module_file(name: str) -> Path | None:
    base = ROOT.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def _statements(tree: ast.AST) -> Iterator[ast.AST]:
    """Every statement of ``tree`` (and each except and case clause), never an expression:
    where imports and docstrings live, at a fraction of ``ast.walk``'s cost."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            children = getattr(node, field, None)
            todo.extend(children if isinstance(children, list) else ())


def _without_docstrings(tree: ast.AST) -> ast.AST:
    for node in _statements(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        docstring = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
        if docstring and isinstance(first.value.value, str):  # type: ignore[union-attr]
            node.body = body[1:] or [ast.Pass()]  # type: ignore[attr-defined,index]
    return tree


def _own_imports(tree: ast.AST, package: str) -> set[str]:
    names: set[str] = set()
    for node in _statements(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    own = {n for n in names if _is_own(n)}
    # a package's __init__ is imported along with any of its submodules
    parents = {".".join(n.split(".")[:i]) for n in own for i in range(1, n.count(".") + 1)}
    return own | {p for p in parents if _is_own(p)} | ({package} if package else set())


def _is_own(name: str) -> bool:
    return any(name == own or name.startswith(own + ".") for own in OWN_PACKAGES)


@cache
def _facts(name: str) -> ModuleFacts | None:
    """One module's facts (None if it has no file here): from the memo while its bytes are
    the ones they were read from, else parsed."""
    path = _module_file(name)
    if path is None:
        return None
    source = path.read_bytes()
    sha256 = hashlib.sha256(source).hexdigest()
    file = path.relative_to(ROOT).as_posix()
    found = _memo().get(name, file, sha256)
    if found is None:
        found = _read_facts(name, path, source)
        _memo().put(name, file, sha256, found)
    return found


def _read_facts(name: str, path: Path, source: bytes) -> ModuleFacts:
    tree = ast.parse(source.decode("utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    imports = frozenset(_own_imports(tree, package))
    references = frozenset(_lazy_references(tree) if name in RESOLVERS.values() else ())
    return ModuleFacts(source_digest(tree), imports, references)  # last: it strips the tree


# Read at import: the code computing versions in this process is the code imported, even
# where newer files were installed since.
READER = reader_of(Path(__file__))


@cache
def _memo() -> FactsMemo:
    return FactsMemo(memo_file(), READER)


@cache
def module_closure(module: str) -> frozenset[str]:
    """The module and every sago module it imports, transitively (lazy imports included, and
    the ``"module:function"`` references of the registries' declarations)."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        name = todo.pop()
        facts = _facts(name)
        if name in seen or facts is None:
            continue
        seen.add(name)
        registry = _facts(RESOLVERS[name]) if name in RESOLVERS else None
        todo.extend(facts.imports | (registry.references if registry else frozenset()))
    return frozenset(seen)


def _lazy_references(tree: ast.AST) -> set[str]:
    """The own modules a registry names as ``"package.module:function"``."""
    found = {
        match.group(1)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        for match in [LAZY_REFERENCE.fullmatch(node.value)]
        if match
    }
    return {n for n in found if _is_own(n)}


def source_digest(tree: ast.AST) -> str:
    """Digest of a syntax tree without docstrings: comments and formatting never count.

    Strips the docstrings from ``tree`` itself (no copy: copying trees cost seconds a run).
    """
    return hashlib.sha256(ast.dump(_without_docstrings(tree)).encode()).hexdigest()


@cache
def code_version(module: str) -> str:
    """Digest of a task module and every sago module it imports, transitively.

    Compared as syntax trees without docstrings, so comments, formatting and documentation
    never invalidate a cache; a change to code a stage runs always does. What each module's
    source yields is kept between processes (``module_facts``): only a changed file is
    parsed again.
    """
    digest = hashlib.sha256()
    for name in sorted(module_closure(module)):
        facts = _facts(name)
        assert facts is not None  # every module of a closure has a file
        digest.update(name.encode())
        digest.update(facts.digest.encode())
    _memo().save()
    return digest.hexdigest()


def _fingerprint(name: str, value: Any) -> str:
    if value is None:
        return "null"
    if name.endswith("_path"):
        return sha256_of(value)
    if name.endswith("_paths"):
        return json.dumps([sha256_of(v) for v in value])
    if isinstance(value, ModelTarget):  # its weights' identity, never where they lie
        return cache_fingerprint(value)
    if isinstance(value, BaseModel):  # a config, without where it writes (PLACE_FIELDS)
        return value.model_dump_json(exclude=set(getattr(value, "PLACE_FIELDS", ())))
    return json.dumps(value, sort_keys=True, default=str)


def output_place(out_dir: str | Path | None, run_dir: Path | None) -> str:
    """Where a stage writes, as the key sees it: relative to the run folder when inside it
    (a moved or renamed run folder keeps its keys), else the absolute path."""
    if out_dir is None:
        return "null"
    where = Path(out_dir).resolve()
    if run_dir is not None and where.is_relative_to(run_dir.resolve()):
        return "run:" + where.relative_to(run_dir.resolve()).as_posix()
    return "abs:" + where.as_posix()


def stage_cache_key(context: Any, parameters: dict[str, Any], run_dir: Path | None = None) -> str:
    """The key of one stage call; ``run_dir`` is the run folder its outputs are placed in."""
    digest = hashlib.sha256()
    digest.update(context.task.name.encode())
    digest.update(code_version(context.task.fn.__module__).encode())
    for name in sorted(parameters):
        if name in _EXCLUDED:
            continue
        digest.update(name.encode())
        digest.update(_fingerprint(name, parameters[name]).encode())
    digest.update(OUTPUT_PLACE.encode())
    digest.update(output_place(parameters.get(OUTPUT_PLACE), run_dir).encode())
    return f"{context.task.name}-{digest.hexdigest()}"
