"""The pages' HTML building blocks shared by the report's sections."""

from __future__ import annotations

import html


def table(headers: list[str], rows: list[list[str]], left: int = 1) -> str:
    """A table; headers are escaped, cells are HTML already; the first ``left`` columns are
    left-aligned (class ``l``), the rest numbers."""

    def cells(values: list[str], tag: str) -> str:
        return "".join(
            f'<{tag} class="l">{v}</{tag}>' if i < left else f"<{tag}>{v}</{tag}>"
            for i, v in enumerate(values)
        )

    body = "".join(f"<tr>{cells(r, 'td')}</tr>" for r in rows)
    return f"<table><tr>{cells([html.escape(h) for h in headers], 'th')}</tr>{body}</table>"
