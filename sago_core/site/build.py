"""Write the results site: every page, the vendored plotly.js, and copies of each run's
report and card with a bar linking back to the site (so the site is linked both ways and
can move as one folder), each naming runs by id and files by name, never by this machine's
paths (``local_paths``). Written through the artifact store: a site inside a runs folder on
an object store is written to the store too.
"""

from __future__ import annotations

import html
import re
from importlib.util import find_spec
from pathlib import Path

from sago_core.artifacts.layout import CARD_HTML_FILE, REPORT_FILE
from sago_core.artifacts.store import atomic_write_bytes
from sago_core.errors import InputError, SagoError
from sago_core.progress import each
from sago_core.site import paths
from sago_core.site.collect import Site, read_site
from sago_core.site.local_paths import LocalPaths, local_paths
from sago_core.site.pages import compare_page, index_page, leaderboard_page, run_page, runs_page
from sago_core.site.redact import harmful_answers, left_out_page, redact_page

_BODY = re.compile(rb"<body[^>]*>", re.IGNORECASE)


def plotly_js() -> bytes:
    """plotly.js as the plotly package ships it (minified, no network at view time)."""
    found = find_spec("plotly")
    if found is None or not found.submodule_search_locations:
        raise SagoError("the results site needs the plotly package (pip install plotly)")
    package = Path(next(iter(found.submodule_search_locations)))
    return (package / "package_data" / "plotly.min.js").read_bytes()


def back_bar(here: str, run_id: str | None) -> bytes:
    """The bar a copied page gets at the top of its body: back to the site (and the run)."""
    top = paths.up(here)
    links = [f'<a style="color:#fff;margin-right:1em" href="{top}{paths.INDEX}">results site</a>']
    if run_id is not None:
        target = html.escape(top + paths.run_page(run_id))
        links.append(f'<a style="color:#fff" href="{target}">run {html.escape(run_id)}</a>')
    return (
        '<nav class="sago-site-back" style="background:#1f3a5f;padding:.4em 1em;'
        f'font-family:system-ui,sans-serif">{"".join(links)}</nav>'
    ).encode()


def with_back_bar(page: bytes, bar: bytes) -> bytes:
    found = _BODY.search(page)
    if found is None:
        return bar + page
    return page[: found.end()] + bar + page[found.end() :]


def _write(out: Path, relative: str, data: bytes) -> None:
    target = out / relative
    if target.is_file() and target.read_bytes() == data:
        return  # unchanged (plotly.js is 4.8 MB): not written, nor put again
    atomic_write_bytes(target, data)


def _copies(site: Site, out: Path, publish: LocalPaths, redact_unsafe: bool = False) -> None:
    for run in site.runs.values():
        unsafe = harmful_answers(run.folder) if redact_unsafe else frozenset()
        for name, relative in (
            (REPORT_FILE, paths.run_report(run.run_id)),
            (CARD_HTML_FILE, paths.run_card(run.run_id)),
        ):
            source = run.folder / name
            if unsafe is None and source.is_file():  # harmful answers not told apart
                bar = back_bar(relative, run.run_id)  # a note in its place, links kept
                _write(out, relative, with_back_bar(left_out_page(name), bar))
            elif unsafe is not None and source.is_file():
                bar = back_bar(relative, run.run_id)
                page = publish.page(redact_page(source.read_bytes(), unsafe))
                _write(out, relative, with_back_bar(page, bar))
    if site.leaderboard_page is not None:
        bar = back_bar(paths.RELEASES, None)
        page = publish.page(site.leaderboard_page.read_bytes())
        _write(out, paths.RELEASES, with_back_bar(page, bar))


def build_site(root: Path, out: Path, redact_unsafe: bool = False) -> Path:
    """The site over the runs folder ``root``, written to ``out``; returns its index page.
    ``redact_unsafe``: the copied reports and cards leave out the answers to harmful
    requests (``redact.py``)."""
    site = read_site(root)
    if not site.runs:
        raise InputError(
            "holds no finished run (a folder with manifest.json and summary.parquet)",
            file=str(root),
        )
    _write(out, paths.PLOTLY, plotly_js())
    publish = local_paths(site)  # a site is published: no path of this machine on any page
    _copies(site, out, publish, redact_unsafe)
    pages = {
        paths.INDEX: index_page(site),
        paths.LEADERBOARD: leaderboard_page(site),
        paths.RUNS: runs_page(site),
    }
    runs = each(site.runs.values(), len(site.runs))
    pages.update({paths.run_page(run.run_id): run_page(site, run) for run in runs})
    pages.update(
        {paths.compare_page(r): compare_page(site, r) for r in site.releases if r.verdicts}
    )
    for relative, text in pages.items():
        _write(out, relative, publish.text(text).encode("utf-8"))
    return out / paths.INDEX
