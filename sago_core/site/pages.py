"""The results site's pages as HTML text: the families' trends (index), the leaderboard,
the runs, each run and each release's comparison with the one before it.

Every link is relative (the site opens from a folder, a file:// URL or a store's web
address alike); every page says where it is from the top bar.
"""

from __future__ import annotations

import html
import json
from typing import Any

from sago_core.report.markup import p_value
from sago_core.report.markup import plain_table as _table
from sago_core.site import paths
from sago_core.site.collect import Release, Site, SiteRun
from sago_core.site.series import Series
from sago_core.site.trends import release_label, trend_figure
from sago_core.vocabulary import AXES

STYLE = """
body{font-family:system-ui,sans-serif;margin:0;color:#222;line-height:1.4}
header{background:#1f3a5f;color:#fff;padding:.6em 1.2em}
header a{color:#fff;margin-right:1.2em;text-decoration:none;font-weight:600}
main{padding:1em 1.2em;max-width:1250px}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#f0f0f0}
.regression{color:#c00000;font-weight:bold}
.na{color:#777}
.trend{width:100%;min-height:460px}
pre{background:#f7f7f7;padding:.6em;overflow:auto;max-height:30em;font-size:.85em}
section{margin-bottom:2em}
.series{border-left:4px solid #1f3a5f;padding-left:.8em;margin:1em 0 2em}
.apart{background:#fff4e5;border:1px solid #e69f00;padding:.4em .7em}
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _num(value: Any) -> str:
    if value is None:
        return '<span class="na">NA</span>'
    if isinstance(value, float):
        return f"{value:.4f}" if value == 0 or abs(value) >= 1e-3 else f"{value:.3g}"
    return _e(value)


def _link(here: str, target: str, text: str, **attrs: str) -> str:
    extra = "".join(f' {k}="{_e(v)}"' for k, v in attrs.items())
    return f'<a href="{_e(paths.up(here) + target)}"{extra}>{_e(text)}</a>'


def page(here: str, title: str, body: str, charts: bool = False) -> str:
    """A whole page at ``here`` (its path in the site): the top bar, then ``body``."""
    nav = " ".join(
        _link(here, target, text)
        for target, text in (
            (paths.INDEX, "Trends"),
            (paths.LEADERBOARD, "Leaderboard"),
            (paths.RUNS, "Runs"),
        )
    )
    script = f'<script src="{paths.up(here)}{paths.PLOTLY}"></script>' if charts else ""
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<style>{STYLE}</style>{script}</head><body><header>{nav}"
        f'<span style="float:right">SAGO results</span></header>'
        f"<main><h1>{_e(title)}</h1>{body}</main></body></html>\n"
    )


def _verdict_cell(here: str, release: Release) -> str:
    if release.regressions:
        text = "significant regression: " + ", ".join(release.regressions)
        return f'<span class="regression">{_e(text)}</span> ' + _link(
            here, paths.compare_page(release), "comparison"
        )
    if release.verdicts:
        return "no significant regression " + _link(here, paths.compare_page(release), "comparison")
    return _e(release.note or "not compared")


def _release_row(here: str, site: Site, series: Series, index: int) -> list[str]:
    release = series.releases[index]
    run = site.runs[release.run_id]
    card = _link(here, paths.run_card(run.run_id), "card") if run.has_card else "no card"
    against = release.against_run
    against_cell = (
        _link(here, paths.run_page(against), against) if against in site.runs else _e(against)
    )
    return [
        _e(release_label(index, release, series.basis)),
        _e(release.spec),
        _link(here, paths.run_page(run.run_id), run.run_id),
        card,
        against_cell,
        _verdict_cell(here, release),
    ]


def _chart(element: str, figure: dict[str, Any]) -> str:
    spec = json.dumps(figure, allow_nan=False).replace("</", "<\\/")
    return (
        f'<div class="trend" id="{element}"></div><script>{{const f={spec};'
        f'Plotly.newPlot("{element}",f.data,f.layout,{{displaylogo:false,responsive:true}});}}'
        "</script>"
    )


def _series_block(here: str, site: Site, series: Series, count: int) -> str:
    anchor = paths.series_id(series.family, series.number)
    head = ["release", "model", "run", "card", "against", "vs previous release"]
    rows = [_release_row(here, site, series, i) for i in range(len(series.releases))]
    title = f"Line {series.number} of {count}" if count > 1 else "One line"
    plural = "s" if len(series.releases) > 1 else ""
    apart = (
        f'<p class="apart">Not joined to line 1: {_e(series.apart)}.</p>' if series.apart else ""
    )
    return (
        f'<div class="series" id="{anchor}"><h3>{title}: {len(series.releases)} '
        f"release{plural} of one design, {_e(series.legend)}</h3>{apart}"
        + _chart(f"chart-{anchor}", trend_figure(series, site.runs))
        + _table(head, rows, **{"class": "releases"})
        + "</div>"
    )


def index_page(site: Site) -> str:
    here = paths.INDEX
    sections = []
    for family, lines in site.families().items():
        blocks = "".join(_series_block(here, site, line, len(lines)) for line in lines)
        sections.append(
            f'<section id="{paths.family_id(family)}"><h2>Family {_e(family)}</h2>'
            + blocks
            + "</section>"
        )
    extra = (
        "<p>" + _link(here, paths.RELEASES, "The watch's comparison across every release") + "</p>"
        if site.leaderboard_page
        else ""
    )
    intro = (
        f"<p>{len(site.runs)} runs, {len(site.releases)} releases in "
        f"{len(site.families())} {'family' if len(site.families()) == 1 else 'families'} from "
        f"<code>{_e(site.root.resolve().name)}</code>. Each chart is one "
        "line: a model family's releases measured with one design (the same prompts, "
        "variants, decoding, sampling and scorer: the runs <code>sago compare --paired</code> "
        "would pair), pooled SGS per axis release after release with 95% bootstrap "
        "intervals; runs of another design are a line of their own, with the reason. A red "
        "ring marks a significant regression against the previous release (paired t-test on "
        "the same prompts, Holm-adjusted, not equivalent).</p>"
    )
    return page(here, "Stability across releases", intro + extra + "".join(sections), True)


def _sgs_cell(row: dict[str, Any] | None) -> str:
    if not row:
        return '<span class="na">not measured</span>'
    if row.get("sgs") is None:
        reason = row.get("missing_reason")
        return '<span class="na">NA' + (f" ({_e(reason)})" if reason else "") + "</span>"
    interval = (
        f" [{_num(row['ci_low'])}, {_num(row['ci_high'])}]"
        if row.get("ci_low") is not None and row.get("ci_high") is not None
        else ""
    )
    return _num(row["sgs"]) + interval


def leaderboard_page(site: Site) -> str:
    here = paths.LEADERBOARD
    rows = []
    for series in site.series:
        family = series.family
        for index, release in enumerate(series.releases):
            pooled = {r["axis"]: r for r in site.runs[release.run_id].pooled[release.spec]}
            cells = []
            for axis in AXES:
                cell = _sgs_cell(pooled.get(axis))
                if axis in release.regressions:
                    cell = f'<span class="regression">{cell} ▲</span>'
                cells.append(cell)
            rows.append(
                [
                    _link(here, paths.INDEX + "#" + paths.family_id(family), family),
                    _link(
                        here,
                        paths.INDEX + "#" + paths.series_id(family, series.number),
                        str(series.number),
                    ),
                    _e(release_label(index, release, series.basis)),
                    _link(here, paths.run_page(release.run_id), release.run_id),
                    *cells,
                    _verdict_cell(here, release),
                ]
            )
    head = ["family", "line", "release", "run", *AXES, "vs previous release"]
    intro = (
        "<p>Pooled SGS per axis [95% CI] of every release (lower is more stable), by family "
        "and line (one design per line: lines of one family are not comparable); ▲ in red: "
        "a significant regression against the previous release of the family.</p>"
    )
    return page(here, "Leaderboard", intro + _table(head, rows, id="leaderboard"))


def runs_page(site: Site) -> str:
    here = paths.RUNS
    rows = []
    for run in reversed(list(site.runs.values())):
        config = run.config
        rows.append(
            [
                _link(here, paths.run_page(run.run_id), run.run_id),
                _e(run.started_at or run.written_at),
                _e(config.get("preset")),
                _e(", ".join(run.pooled)),
                _e(", ".join(config.get("datasets") or [])),
                _e(config.get("n")),
                _e((run.config_hash or "")[:12]),
                _link(here, paths.run_report(run.run_id), "report") if run.has_report else "",
                _link(here, paths.run_card(run.run_id), "card") if run.has_card else "",
            ]
        )
    head = ["run", "started", "preset", "models", "datasets", "n", "config", "report", "card"]
    return page(here, "Runs", _table(head, rows, id="runs"))


def run_page(site: Site, run: SiteRun) -> str:
    here = paths.run_page(run.run_id)
    links = [
        _link(here, paths.run_report(run.run_id), "report") if run.has_report else "no report",
        _link(here, paths.run_card(run.run_id), "stability card") if run.has_card else "no card",
    ]
    body = [f"<p>{' · '.join(links)}</p>"]
    for spec, pooled in run.pooled.items():
        rows = [[_e(r["axis"]), _sgs_cell(r), _e(r["n"]), p_value(r["p_holm"])] for r in pooled]
        body.append(
            f"<h2>{_e(spec)}</h2><p>identity {_e(run.identities.get(spec))}</p>"
            + _table(["axis", "SGS [95% CI]", "n", "p (Holm)"], rows)
        )
    mine = [r for r in site.releases if r.run_id == run.run_id]
    later = [r for r in site.releases if r.against_run == run.run_id]
    items = []
    for release in mine:
        anchor = paths.INDEX + "#" + paths.family_id(release.family)
        items.append(
            f"<li>{_e(release.spec)} in {_link(here, anchor, 'family ' + release.family)}: "
            f"{_verdict_cell(here, release)}</li>"
        )
    for release in later:
        items.append(
            f"<li>compared with the later release {_e(release.spec)} "
            f"({_link(here, paths.run_page(release.run_id), release.run_id)}): "
            f"{_verdict_cell(here, release)}</li>"
        )
    body.append("<h2>Releases and comparisons</h2><ul>" + "".join(items) + "</ul>")
    config = json.dumps(run.config, indent=2, sort_keys=True, default=str)
    body.append(
        f"<h2>Configuration</h2><p>config hash <code>{_e(run.config_hash)}</code>, started "
        f"{_e(run.started_at or 'NA (not recorded)')}, written {_e(run.written_at)}</p>"
        "<details open><summary>the run's configuration</summary>"
        f"<pre>{html.escape(config, quote=False)}</pre></details>"
    )
    return page(here, f"Run {run.run_id}", "".join(body))


def compare_page(site: Site, release: Release) -> str:
    here = paths.compare_page(release)
    against = release.against_run or ""
    rows = []
    for axis, row in release.verdicts.items():
        verdict = _e(row.get("verdict"))
        if axis in release.regressions:
            verdict = f'<span class="regression">{verdict}</span>'
        interval = (
            f"[{_num(row.get('ci_low'))}, {_num(row.get('ci_high'))}]"
            if row.get("ci_low") is not None
            else f'<span class="na">NA ({_e(row.get("ci_missing_reason"))})</span>'
        )
        rows.append(
            [
                _e(axis),
                _e(row.get("n")),
                _num(row.get("mean_diff")),
                interval,
                p_value(row.get("p_holm")),
                p_value(row.get("p_tost_holm")),
                verdict,
            ]
        )
    head = ["axis", "n", "mean diff (B - A)", "95% CI", "p (Holm)", "p TOST (Holm)", "verdict"]
    a_link = _link(here, paths.run_page(against), against) if against in site.runs else _e(against)
    intro = (
        f"<p>A: {_e(release.against_spec)} ({a_link}); B: {_e(release.spec)} "
        f"({_link(here, paths.run_page(release.run_id), release.run_id)}). Paired over the "
        "prompts both runs share; b_worse is a significant regression (Holm-adjusted paired "
        "t-test rejects, the equivalence test does not).</p><p>"
        + _link(here, paths.INDEX + "#" + paths.family_id(release.family), "the family's trend")
        + "</p>"
    )
    return page(here, f"{release.spec}: against the previous release", intro + _table(head, rows))
