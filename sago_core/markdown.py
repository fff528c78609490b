"""Markdown tables and plain-text numbers, written the same way on every Markdown page."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def plain(value: float | None, digits: int = 4) -> str:
    """A number to ``digits`` decimals; NA for None."""
    return "NA" if value is None else f"{value:.{digits}f}"


def table(headers: Sequence[object], rows: Iterable[Sequence[object]]) -> list[str]:
    """A Markdown table's lines; a ``|`` inside a cell is escaped."""

    def line(cells: Sequence[object]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    return [line(headers), "|" + "---|" * len(headers), *map(line, rows)]
