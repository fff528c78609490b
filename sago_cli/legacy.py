"""Old spellings of ``sago`` commands, rewritten to today's before parsing.

Scripts written against the flat command list keep working: each old spelling has exactly one
new one with the same meaning (hidden: ``sago --help`` shows only today's; the glossary lists
both). ``note`` hears one line per rewrite, naming the new spelling. A spelling whose meaning
would change is not rewritten here; its command refuses it in one line instead.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sago_cli.parser import closest

RENAMED = {  # old command -> new command (and its first words)
    "consistency": ["study"],
    "checkpoints": ["series"],
    "plan": ["design"],
    "judge-audit": ["audit", "judge"],
}
HELP = ("-h", "--help")
COMPARE_MODES = ("page", "paired", "transfer")
EXPORT_MODES = ("generations", "dataset", "inspect", "hf-results", "training")
FORMAT_MODES = {"hf-dataset": "dataset", "inspect": "inspect", "hf-results": "hf-results"}


def _without(words: list[str], flag: str, takes_value: bool = False) -> list[str]:
    """``words`` less every ``flag`` (and the value after it when it takes one)."""
    kept: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word == flag:
            skip = takes_value
        elif not (takes_value and word.startswith(flag + "=")):
            kept.append(word)
    return kept


def _renamed(words: list[str], old: str, new: str) -> list[str]:
    """``words`` with the option ``old`` spelled ``new``, in both ``--old VALUE`` and
    ``--old=VALUE`` forms."""
    return [
        new + word[len(old) :] if word == old or word.startswith(old + "=") else word
        for word in words
    ]


def _has(words: list[str], flag: str) -> bool:
    """Whether ``words`` give ``flag``, alone or as ``flag=VALUE``."""
    return any(word == flag or word.startswith(flag + "=") for word in words)


def _value_of(words: list[str], flag: str) -> str | None:
    """The value ``words`` give ``flag`` (``--flag VALUE`` or ``--flag=VALUE``), or None."""
    for at, word in enumerate(words):
        if word == flag and at + 1 < len(words):
            return words[at + 1]
        if word.startswith(flag + "="):
            return word.partition("=")[2]
    return None


def _compare(rest: list[str]) -> tuple[list[str], str]:
    """``compare A B --paired`` -> ``compare paired A B`` (``--transfer`` likewise)."""
    for flag in ("--transfer", "--paired"):
        if flag in rest:
            mode = flag[2:]
            kept = _without(_without(rest, "--transfer"), "--paired")
            return [mode, *kept], f"`sago compare {flag}` is now `sago compare {mode}`"
    return ["page", *rest], "`sago compare RUN...` is now `sago compare page RUN...`"


def _export(rest: list[str]) -> tuple[list[str], str]:
    """``export RUN --training K`` -> ``export training RUN --kind K``; ``--format F`` ->
    ``export dataset`` (F hf-dataset), ``inspect`` or ``hf-results``; otherwise
    ``export generations``."""
    if _has(rest, "--training"):
        words = _renamed(rest, "--training", "--kind")
        return [
            "training",
            *words,
        ], "`sago export --training K` is now `sago export training --kind K`"
    form = _value_of(rest, "--format")
    if form in FORMAT_MODES:
        mode, words = FORMAT_MODES[form], _without(rest, "--format", takes_value=True)
        return [mode, *words], f"`sago export --format {form}` is now `sago export {mode}`"
    return ["generations", *rest], "`sago export RUN` is now `sago export generations RUN`"


def _kind(words: list[str]) -> list[str]:
    """``--kind pairs`` -> ``--kind consistency``, the objective that reads the export."""
    return [
        "consistency"
        if w == "pairs" and at and words[at - 1] in ("--kind", "--training")
        else w.replace("=pairs", "=consistency")
        if w in ("--kind=pairs", "--training=pairs")
        else w
        for at, w in enumerate(words)
    ]


def _score(rest: list[str]) -> list[str]:
    """``score --generations FILE`` -> ``score FILE``."""
    for at, word in enumerate(rest):
        if word.startswith("--generations="):
            return [word.partition("=")[2], *rest[:at], *rest[at + 1 :]]
        if word == "--generations":
            return [*rest[at + 1 : at + 2], *rest[:at], *rest[at + 2 :]]
    return rest


MODES: dict[str, tuple[tuple[str, ...], Callable[[list[str]], tuple[list[str], str]]]] = {
    "compare": (COMPARE_MODES, _compare),
    "export": (EXPORT_MODES, _export),
}


def _names_a_mode(word: str, modes: tuple[str, ...]) -> bool:
    """``word`` is a mode, help, or a mistyped mode (near one, and no such path exists): the
    parser then answers it ("did you mean"), instead of reading it as a run folder."""
    if word in (*modes, *HELP):
        return True
    return not word.startswith("-") and closest(word, modes) is not None and not Path(word).exists()


def modern(argv: list[str], note: Callable[[str], object] | None = None) -> list[str]:
    """``argv`` in today's spelling; ``note`` hears one line per rewrite (default: none)."""
    say = note or (lambda line: None)
    if not argv:
        return argv
    command, rest = argv[0], argv[1:]
    if command == "export" and _kind(rest) != rest:
        rest, argv = _kind(rest), [command, *_kind(rest)]
        say("`sago export training --kind pairs` is now `sago export training --kind consistency`")
    if command in RENAMED:
        words = RENAMED[command]
        if command == "checkpoints":
            rest = _renamed(rest, "--base", "--model")
        say(f"`sago {command}` is now `sago {' '.join(words)}`")
        return [*words, *rest]
    if command in MODES and not (rest and _names_a_mode(rest[0], MODES[command][0])):
        words, line = MODES[command][1](rest)
        say(line)
        return [command, *words]
    if command == "score" and _has(rest, "--generations"):
        say("`sago score --generations FILE` is now `sago score FILE`")
        return [command, *_score(rest)]
    return argv
