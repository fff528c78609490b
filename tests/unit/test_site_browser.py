"""The results site in headless Chromium, over a hand-made three-release watch
(tests/unit/test_site.py): each family's trend chart draws offline from the vendored
plotly.js, with its axis titles, one error bar per point, and the regression ringed in red
on the axis and release where the paired verdict says b_worse; the pages it links load and
link back; the page fits a 1280 px window.

Screenshots go to ``SAGO_SITE_SCREENSHOTS`` when set (a folder), else to the test's tmp."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from html import unescape
from pathlib import Path
from typing import Any

import pytest

from sago_core.site import paths
from sago_core.site.build import build_site
from sago_core.site.trends import REGRESSION_NAME
from sago_core.vocabulary import AXES
from tests.browser import FLAGS, chromium, screenshot
from tests.unit.test_site import FAMILY, RELEASES, broken_links, three_release_watch

pytestmark = pytest.mark.slow  # a browser

# After load and a frame for Plotly: what each chart drew, read from its SVG.
PROBE = """<script>window.addEventListener('load',()=>setTimeout(()=>{const out={};try{
out.charts=[...document.querySelectorAll('.trend')].map(c=>{
  const traces=[...c.querySelectorAll('.scatterlayer .trace')];
  const last=traces.length?traces[traces.length-1]:null;
  const ring=last?last.querySelector('.points path'):null;
  return {id:c.id,svg:!!c.querySelector('.main-svg'),
    points:traces.map(t=>t.querySelectorAll('.points path').length),
    errorbars:[...c.querySelectorAll('.errorbar path')].filter(p=>p.getAttribute('d')).length,
    legend:[...c.querySelectorAll('.legendtext')].map(e=>e.textContent),
    titles:[...c.querySelectorAll('.g-xtitle text, .g-ytitle text')].map(e=>e.textContent),
    ticks:[...c.querySelectorAll('.xtick text')].map(e=>e.textContent),
    notes:[...c.querySelectorAll('.annotation-text')].map(e=>e.textContent),
    ring:ring?getComputedStyle(ring).stroke:null};});
out.width=document.documentElement.scrollWidth;
out.links=[...document.querySelectorAll('a')].map(a=>a.href);
}catch(e){out.error=String(e)+' '+e.stack;}
document.body.setAttribute('data-site',JSON.stringify(out));},300));</script>"""


def _dom(page: Path, work: Path, probe: str = "") -> str:
    """The DOM Chromium built from ``page`` (with ``probe`` appended to a copy beside it)."""
    target = page
    if probe:
        target = page.with_name("probe-" + page.name)
        target.write_text(page.read_text(encoding="utf-8").replace("</body>", probe + "</body>"))
    done = subprocess.run(
        [
            chromium(),
            *FLAGS,
            "--window-size=1280,900",
            f"--user-data-dir={work / 'profile'}",
            "--dump-dom",
            target.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    if probe:
        target.unlink()
    return done.stdout


def _probe(page: Path, work: Path) -> dict[str, Any]:
    found = re.search(r'data-site="([^"]*)"', _dom(page, work, PROBE))
    assert found, "the site's page never finished loading in Chromium"
    seen: dict[str, Any] = json.loads(unescape(found.group(1)))
    assert "error" not in seen, seen.get("error")
    return seen


def test_the_trend_chart_draws_the_marked_regression_and_the_links_resolve(
    tmp_path: Path,
) -> None:
    root = three_release_watch(tmp_path / "runs")
    index = build_site(root, tmp_path / "site")
    site = index.parent
    assert broken_links(site) == []

    seen = _probe(index, tmp_path)
    charts = {c["id"]: c for c in seen["charts"]}
    family = charts[f"chart-{paths.series_id(FAMILY, 1)}"]
    assert family["svg"]
    # six axes over three releases (mr is NA in the first: a gap), then the one ring
    assert family["points"] == [3, 3, 3, 3, 3, 2, 1]
    assert family["errorbars"] == 3 * len(AXES) - 1  # the NA point has none
    assert family["legend"] == [*AXES, REGRESSION_NAME]
    assert family["titles"] == [
        "release, ordered by when the watch first evaluated each release",
        "pooled SGS (95% CI)",
    ]
    assert family["ticks"][2].startswith("3. family-a")
    assert family["notes"] == ["regression: prob"]
    assert family["ring"] == "rgb(192, 0, 0)"
    assert len(charts) == 2 and seen["width"] <= 1280

    site_uri = site.resolve().as_uri()
    for run_id, *_ in RELEASES:
        assert f"{site_uri}/runs/{run_id}/index.html" in seen["links"]
    run_page = _dom(site / "runs" / RELEASES[2][0] / "index.html", tmp_path)
    assert "Configuration" in run_page and "significant regression: prob" in run_page
    report = _dom(site / "runs" / RELEASES[2][0] / "report.html", tmp_path)
    assert 'class="sago-site-back"' in report and "report watch-a" in report

    shots = Path(os.environ.get("SAGO_SITE_SCREENSHOTS") or tmp_path / "shots")
    shots.mkdir(parents=True, exist_ok=True)
    for page in (index, site / paths.LEADERBOARD):
        shot = screenshot(page, shots / f"site-{page.stem}.png", tmp_path)
        assert shot.stat().st_size > 10_000
    shutil.rmtree(tmp_path / "profile", ignore_errors=True)


def test_a_site_over_a_demo_run_and_one_of_other_settings_draws_two_lines(
    tmp_path: Path,
) -> None:
    from tests.unit.test_site_series import DEMO, SHORT, _one

    root = tmp_path / "runs"
    _one(root, "demo", "2026-11-01T09:00:00+00:00", DEMO)
    _one(root, "demo-rerun", "2026-11-02T09:00:00+00:00", DEMO)
    _one(root, "other-settings", "2026-11-03T09:00:00+00:00", SHORT, prompts=2)
    index = build_site(root, tmp_path / "site")
    seen = _probe(index, tmp_path)
    drawn = [(c["points"], c["ticks"]) for c in seen["charts"]]
    # one point an axis: the demo's two runs on the first line, the other settings apart
    assert [points for points, _ in drawn] == [[2] * len(AXES), [1] * len(AXES)]
    assert drawn[0][1][0].startswith("1. smollm2-135m @b179c95demo · 2026-11-01")
    assert seen["width"] <= 1280
    shots = Path(os.environ.get("SAGO_SITE_SCREENSHOTS") or tmp_path / "shots")
    shots.mkdir(parents=True, exist_ok=True)
    shot = screenshot(index, shots / "site-two-designs.png", tmp_path)
    assert shot.stat().st_size > 10_000
