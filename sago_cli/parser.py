"""The parser class every ``sago`` command uses: help texts that show their defaults, and a
"did you mean" for a mistyped command or choice.

A default is shown only where it says something (not for flags, not for ``None``: an option
whose value comes from the preset says so in its own help text).
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Iterable
from typing import Any


class DefaultsFormatter(argparse.HelpFormatter):
    """Appends ``(default: X)`` to an option's help unless the help already names its
    default, the default is ``None``/``False`` or suppressed, or the option is a flag."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        help_text = action.help or ""
        default = action.default
        if (
            "default" in help_text
            or default is None
            or default is False
            or default == argparse.SUPPRESS
            or isinstance(action, argparse._StoreConstAction)  # store_true and friends
            or not action.option_strings
        ):
            return help_text
        return f"{help_text} (default: {_shown(default)})"


def _shown(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ",".join(str(item) for item in value)
    return str(value).replace("%", "%%")


def closest(value: str, choices: Iterable[Any]) -> str | None:
    """The choice nearest to a mistyped ``value`` (difflib's ratio at least 0.6), or None."""
    names = [str(choice) for choice in choices]
    found = difflib.get_close_matches(value, names, n=1)
    return found[0] if found else None


class SagoParser(argparse.ArgumentParser):
    """``argparse`` with defaults in help texts and a suggestion for a mistyped choice."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", DefaultsFormatter)
        super().__init__(*args, **kwargs)

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        choices = action.choices
        if choices is None or value in choices:
            return
        listed = ", ".join(repr(str(choice)) for choice in choices)
        message = f"invalid choice: {str(value)!r} (choose from {listed})"
        suggestion = closest(str(value), choices)
        if suggestion is not None:
            message += f"; did you mean {suggestion!r}?"
        raise argparse.ArgumentError(action, message)
