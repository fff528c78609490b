"""A stage's code version reads imports and docstrings from statements only (never walking
expressions, which is most of a tree): none may be missed wherever a statement holds one."""

from __future__ import annotations

import ast

from sago.tasks.caching import _own_imports, source_digest

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
