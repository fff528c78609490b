"""Placeholder-like text in a user's prompts: ``{question}`` or ``{{ name }}`` left from a
template that was never filled. A heuristic, so by default a warning naming the rows (an
error only with ``strict_placeholders``), and braces that belong to LaTeX or code never
count: a LaTeX argument (``\\documentclass{article}``, ``x^{n}``, ``a_{i}``), a shell or
JavaScript expansion (``${HOME}``), anything inside a fenced code block or inline backticks,
and a brace group in a line that reads as code (``if (x) { y }``, ``f(x) {``, ``x = {a}``).
"""

from __future__ import annotations

import re

# {x}, {question}, {{ name }}: one identifier inside one or two pairs of braces
PLACEHOLDER = re.compile(r"\{\{?\s*[A-Za-z_][A-Za-z0-9_]*\s*\}\}?")
FENCED = re.compile(r"```.*?(```|$)", re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
# what may stand right before a LaTeX or code brace: \command, \command[opts], ^, _, $
LATEX_OR_EXPANSION = re.compile(r"(\\[A-Za-z@]+\*?(\[[^\]]*\])?(\{[^{}]*\})*|[\^_$])\s*$")
CODE_LINE = re.compile(
    r"[;=)]\s*$|\b(if|for|while|switch)\s*\(|\b(function|def|struct)\b|\belse\s*$"
)


def _blank(match: re.Match[str]) -> str:
    return " " * len(match.group())


def find_placeholders(text: str) -> list[str]:
    """The placeholder-like brace groups of ``text``, LaTeX and code braces left out."""
    prose = INLINE_CODE.sub(_blank, FENCED.sub(_blank, text))
    found = []
    for match in PLACEHOLDER.finditer(prose):
        before = prose[: match.start()]
        line = before.rpartition("\n")[2]
        if LATEX_OR_EXPANSION.search(line):
            continue
        if CODE_LINE.search(line):
            continue
        found.append(match.group())
    return found
