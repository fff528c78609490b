"""A stage's code version reads imports and docstrings from statements only (never walking
expressions, which is most of a tree): none may be missed wherever a statement holds one.
What it reads off each module is kept between processes, and never yields another version."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sago.tasks import caching
from sago.tasks.caching import _own_imports, source_digest
from sago.tasks.module_facts import MEMO_NAME
from sago_core.storage.location import CACHE_ENV

NESTED = """
def f(x):
    try:
        import sago_core.a
    except ImportError:
        from sago_core.b import c
    else:
        if x:
            import sago_core.d
    finally:
        with x:
            from sago_core import e
    match x:
        case 1:
            import sago_core.f
    for _ in x:
        import numpy
    else:
        import sago_core.g
"""


def test_imports_are_found_in_every_kind_of_block() -> None:
    found = _own_imports(ast.parse(NESTED), "")
    wanted = {"sago_core.a", "sago_core.b.c", "sago_core.d", "sago_core.e", "sago_core.f"}
    assert wanted | {"sago_core.g"} <= found
    assert "numpy" not in found


def test_a_docstring_in_a_nested_block_is_stripped_like_a_comment() -> None:
    plain = "class A:\n    def f(self):\n        if self:\n            return 1\n"
    documented = (
        'class A:\n    """A."""\n    def f(self):\n        """F."""\n'
        '        if self:\n            """why"""\n            return 1\n'
    )
    changed = plain.replace("return 1", "return 2")
    assert source_digest(ast.parse(plain)) == source_digest(ast.parse(documented))
    assert source_digest(ast.parse(plain)) != source_digest(ast.parse(changed))


# What each module's source yields is kept between processes (tasks/module_facts.py). A
# "new process" below is this one with everything derived so far forgotten.
MEMO_PROBE = """
import ast, json, sys
from sago.tasks.caching import code_version
parse, parsed = ast.parse, []
ast.parse = lambda *args, **kwargs: parsed.append(1) or parse(*args, **kwargs)
print(json.dumps({"versions": [code_version(m) for m in sys.argv[1:]], "parsed": len(parsed)}))
"""
MODULES = {
    "__init__.py": '"""A package."""\n',
    "a.py": "from sago_core import b\n\n\ndef f(x):\n    return b.g(x) * 2\n",
    "b.py": "def g(x):\n    return x + 1\n",
}


def _probe(cache: Path, *modules: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", MEMO_PROBE, *modules],
        env={**os.environ, CACHE_ENV: str(cache)},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def test_a_later_process_reads_the_memo_and_gets_the_same_versions(tmp_path: Path) -> None:
    modules = ("sago.tasks.provenance", "sago.tasks.metrics")
    empty = _probe(tmp_path, *modules)
    warm = _probe(tmp_path, *modules)
    assert warm["versions"] == empty["versions"]
    assert empty["parsed"] > 100 and warm["parsed"] == 0


def _forget() -> None:
    for derived in (caching._facts, caching.module_closure, caching.code_version, caching._memo):
        derived.cache_clear()


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A source tree of two small modules (``sago_core.a`` imports ``sago_core.b``) in place
    of sago's, its memo in a cache folder of its own."""
    package = tmp_path / "src" / "sago_core"
    package.mkdir(parents=True)
    for name, text in MODULES.items():
        (package / name).write_text(text)
    monkeypatch.setattr(caching, "ROOT", tmp_path / "src")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    _forget()
    yield package
    _forget()  # the next test sees sago's own modules again


def _new_process_version(
    monkeypatch: pytest.MonkeyPatch, module: str = "sago_core.a"
) -> tuple[str, int]:
    """A module's code version as a new process computes it, and how many modules it parsed."""
    _forget()
    parse, parsed = ast.parse, []
    monkeypatch.setattr(ast, "parse", lambda *a, **k: parsed.append(1) or parse(*a, **k))
    version = caching.code_version(module)
    monkeypatch.setattr(ast, "parse", parse)
    return version, len(parsed)


def test_an_edited_module_is_parsed_again_and_only_its_code_counts(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, parsed = _new_process_version(monkeypatch)
    assert parsed == 3
    assert _new_process_version(monkeypatch) == (first, 0)

    b = tree / "b.py"
    b.write_text(MODULES["b.py"].replace("x + 1", "x + 2"))
    edited, parsed = _new_process_version(monkeypatch)  # the memo still holds the old b
    assert edited != first and parsed == 1
    monkeypatch.setenv(CACHE_ENV, str(tree.parent.parent / "empty"))
    assert _new_process_version(monkeypatch) == (edited, 3)

    b.write_text('"""G."""\n\n\ndef g(x):\n    # why two\n    return x + 2  # always\n')
    assert _new_process_version(monkeypatch) == (edited, 1)


def test_a_module_made_a_package_of_the_same_bytes_is_parsed_again(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A package's own name is its package, a module's is its parent: the same bytes yield
    other imports."""
    (tree / "c.py").write_text(MODULES["b.py"])
    as_module, _ = _new_process_version(monkeypatch, "sago_core.c")
    (tree / "c").mkdir()
    (tree / "c.py").rename(tree / "c" / "__init__.py")
    as_package, parsed = _new_process_version(monkeypatch, "sago_core.c")
    monkeypatch.setenv(CACHE_ENV, str(tree.parent.parent / "empty"))
    assert (as_package, parsed) == (_new_process_version(monkeypatch, "sago_core.c")[0], 1)
    assert as_package != as_module


@pytest.mark.parametrize(
    "damage",
    [
        lambda memo: b"\x00 not json",
        lambda memo: b"[]",
        lambda memo: json.dumps({**memo, "modules": ["sago_core.a"]}).encode(),
        lambda memo: json.dumps(
            {
                **memo,
                "modules": {
                    name: {**entry, "digest": 5, "imports": "sago_core.b"}
                    for name, entry in memo["modules"].items()
                },
            }
        ).encode(),
    ],
    ids=["not-json", "not-a-memo", "modules-not-a-map", "entries-of-wrong-types"],
)
def test_a_damaged_memo_is_ignored_and_written_anew(
    tree: Path, monkeypatch: pytest.MonkeyPatch, damage: Callable[[dict[str, Any]], bytes]
) -> None:
    right, _ = _new_process_version(monkeypatch)
    memo = Path(os.environ[CACHE_ENV]) / MEMO_NAME
    memo.write_bytes(damage(json.loads(memo.read_bytes())))
    assert _new_process_version(monkeypatch) == (right, 3)
    assert _new_process_version(monkeypatch) == (right, 0)


def test_an_unwritable_cache_folder_still_gives_the_version(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    right, _ = _new_process_version(monkeypatch)
    not_a_folder = tree.parent.parent / "file"
    not_a_folder.write_text("")
    monkeypatch.setenv(CACHE_ENV, str(not_a_folder / "cache"))
    assert _new_process_version(monkeypatch) == (right, 3)
    assert _new_process_version(monkeypatch) == (right, 3)


def test_facts_read_by_other_code_are_not_used(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Facts filed by another Python or another version of the code that reads them (its
    reader) are ignored, even where their files' bytes match."""
    right, _ = _new_process_version(monkeypatch)
    memo = Path(os.environ[CACHE_ENV]) / MEMO_NAME
    stored = json.loads(memo.read_bytes())
    forged = {
        name: {**entry, "digest": "0" * 64, "imports": []}
        for name, entry in stored["modules"].items()
    }
    memo.write_text(json.dumps({"reader": "another reader", "modules": forged}))
    assert _new_process_version(monkeypatch) == (right, 3)
    memo.write_text(json.dumps({**stored, "modules": forged}))  # the same reader: trusted
    assert _new_process_version(monkeypatch)[0] != right


def test_a_registry_edit_moves_its_resolvers_closure_with_a_warm_memo(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A resolver depends on the code its registry names as "module:function": editing only
    the registry changes the resolver's closure and version."""
    resolver, registry = next(iter(caching.RESOLVERS.items()))
    for name, text in ((resolver, "def build():\n    return 1\n"), (registry, '"sago_core.b:g"\n')):
        path = tree.parent.joinpath(*name.split(".")).with_suffix(".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        (path.parent / "__init__.py").touch()
        path.write_text(text)
    (tree / "c.py").write_text("def h(x):\n    return x\n")
    first, _ = _new_process_version(monkeypatch, resolver)
    assert "sago_core.b" in caching.module_closure(resolver)
    tree.parent.joinpath(*registry.split(".")).with_suffix(".py").write_text('"sago_core.c:h"\n')
    edited, parsed = _new_process_version(monkeypatch, resolver)
    closure = caching.module_closure(resolver)
    assert "sago_core.c" in closure and "sago_core.b" not in closure
    assert edited != first and parsed == 2  # the registry and the module it now names


def test_no_home_directory_still_gives_the_version(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A container run as a user without a home: no cache folder can be named, the facts
    are kept in the process only."""
    right, _ = _new_process_version(monkeypatch)

    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.delenv(CACHE_ENV)
    monkeypatch.setattr(Path, "home", staticmethod(no_home))
    assert _new_process_version(monkeypatch) == (right, 3)
    assert _new_process_version(monkeypatch) == (right, 3)
