"""The pages' HTML building blocks shared by the report's sections."""

from __future__ import annotations

import base64
import html
import math
import re
from dataclasses import dataclass
from typing import Any

TAG = re.compile(r"<[^>]*>")
LONG_TEXT = 40  # characters: a longer cell (a note, a reason) wraps (a ``div.w`` inside
# it); others keep to one line, and a table wider than the page scrolls in its box

NA = '<span class="na">NA</span>'  # a missing value, in red


def na(reason: str | None = None) -> str:
    """NA in red, with the reason it is missing as its tooltip when there is one."""
    if not reason:
        return NA
    return f'<span class="na" title="{html.escape(reason, quote=True)}">NA</span>'


def table(headers: list[str], rows: list[list[str]], left: int = 1) -> str:
    """A table inside its own horizontally scrolling box (class ``scroll``), so a wide
    table never widens the page; headers are escaped, cells are HTML already; the first
    ``left`` columns are left-aligned (class ``l``), the rest numbers; a cell of more than
    LONG_TEXT characters may wrap (its content in a ``div.w``)."""

    def cells(values: list[str], tag: str) -> str:
        out = []
        for i, v in enumerate(values):
            text = f'<div class="w">{v}</div>' if len(TAG.sub("", v)) > LONG_TEXT else v
            attribute = ' class="l"' if i < left else ""
            out.append(f"<{tag}{attribute}>{text}</{tag}>")
        return "".join(out)

    body = "".join(f"<tr>{cells(r, 'td')}</tr>" for r in rows)
    head = cells([html.escape(h) for h in headers], "th")
    return f'<div class="scroll"><table><tr>{head}</tr>{body}</table></div>'


def plain_table(headers: list[str], rows: list[list[str]], **attrs: str) -> str:
    """A bare table (no scrolling box, no alignment classes: pages with their own style);
    headers and ``attrs`` (the table's HTML attributes) are escaped, cells are HTML already."""
    extra = "".join(f' {k}="{html.escape(v)}"' for k, v in attrs.items())
    top = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table{extra}><tr>{top}</tr>{body}</table>"


P_FLOOR = 1e-4  # p-values below it are written "< 1e-4"


def p_value(value: Any) -> str:
    """A p-value as every table of the report writes it: "< 1e-4" below P_FLOOR, else
    three significant digits ("0.0312", "0.500", "1.00"); NA when missing."""
    if value is None or value != value:
        return NA
    if value < P_FLOOR:
        return "&lt; 1e-4"
    return f"{value:#.3g}"


def image(name: str, png: bytes, alt: str | None = None) -> str:
    """An inlined PNG; ``alt`` says what it shows (the figure's name when not given)."""
    data = base64.b64encode(png).decode()
    text = html.escape(alt or name, quote=True)
    return f'<img id="fig-{name}" alt="{text}" src="data:image/png;base64,{data}">'


@dataclass(frozen=True)
class Section:
    """One titled part of a page: ``<section id=KEY><h2>TITLE</h2>BODY</section>``; BODY
    is HTML already. A page is a list of sections (and raw HTML strings from builders that
    bring their own headings), so a new part is one more item in that list."""

    key: str
    title: str
    body: str

    def html(self) -> str:
        return (
            f'<section id="{html.escape(self.key)}"><h2>{html.escape(self.title)}</h2>'
            f"{self.body}</section>"
        )


def page(title: str, style: str, parts: list[Section | str]) -> str:
    """A self-contained page from its parts, in order."""
    body = "".join(p.html() if isinstance(p, Section) else p for p in parts)
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<style>{style}</style></head><body>{body}</body></html>"
    )


def fmt(value: Any, digits: int = 4) -> str:
    """A table cell: NA in red for None, a float to ``digits`` (significant below 1e-3)."""
    if value is None:
        return NA
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1e-3 and value != 0 else f"{value:.{digits}f}"
    return html.escape(str(value))


def number(value: Any) -> str:
    """A number as plain text (Markdown, the card): NA for None or a non-finite float, four
    decimals, three significant digits below 1e-3."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "NA"
    if isinstance(value, float):
        return f"{value:.3g}" if value != 0 and abs(value) < 1e-3 else f"{value:.4f}"
    return str(value)


def axis_rank() -> Any:
    """The ``axis`` column's place in the registry's order (unknown axes last): every table
    of the report and the card lists axes in that order."""
    import polars as pl

    from sago_core.vocabulary import AXES

    order = {axis: i for i, axis in enumerate(AXES)}
    return pl.col("axis").replace_strict(order, default=len(AXES), return_dtype=pl.Int32)
