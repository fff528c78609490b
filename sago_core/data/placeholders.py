"""Placeholder-like text in a user's prompts: ``{question}``, ``{{ name }}`` or ``{your
answer}`` left from a template that was never filled. A placeholder is one to four words
(letters, digits, ``_``, ``-``; the first starts with a letter or ``_``) inside one or two
pairs of braces. A heuristic, so by default a warning naming the rows (an error only with
``strict_placeholders``), and braces that belong to LaTeX or code never count: a LaTeX
argument (``\\documentclass{article}``, ``\\frac{a}{b}``, ``x^{n}``, ``a_{i}``), a shell or
JavaScript expansion (``${HOME}``), anything inside a fenced code block or inline backticks,
a brace group in a line that reads as code (``if (x) { y }``, ``f(x) {``, ``x = {a}``), and a
group of several words that holds a Python keyword (``{x for x in y}``: a comprehension).
Dicts, sets and JSON (``{"a": 1}``, ``{x: 1 for x in y}``, ``{1, 2}``) hold quotes, colons,
commas or digits first, which a placeholder never does.
"""

from __future__ import annotations

import re

# {x}, {question}, {{ name }}, {your answer}: one to four words in one or two pairs of braces
_WORD = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?"
PLACEHOLDER = re.compile(
    r"\{\{?[ \t]*(?P<words>[A-Za-z_](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?(?:[ \t]+"
    + _WORD
    + r"){0,3})[ \t]*\}\}?"
)
# words that make a several-word brace group code, not a template field
CODE_WORDS = frozenset(
    {"for", "in", "if", "else", "not", "and", "or", "is", "lambda", "return", "yield"}
    | {"await", "async", "import", "from", "as", "with", "while", "def", "class"}
)
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
        words = match.group("words").split()
        if len(words) > 1 and CODE_WORDS.intersection(words):
            continue
        found.append(match.group())
    return found
