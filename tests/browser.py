"""Headless Chromium (Debian's ``chromium`` package) for report tests.

``SAGO_REQUIRE_BROWSER=1`` (set by .ci/run, which installs the package) turns a missing
browser into a failure instead of a skip.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from html import unescape
from pathlib import Path

import pytest

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--no-first-run",
    "--virtual-time-budget=5000",
]
# Appended to a copy of the page only: after load, record each image's decode state.
PROBE = (
    "<script>window.addEventListener('load',()=>{document.body.setAttribute('data-figures',"
    "JSON.stringify([...document.images].map(i=>[i.id,i.complete,i.naturalWidth,"
    "i.naturalHeight])))});</script>"
)


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("SAGO_REQUIRE_BROWSER") == "1":
        pytest.fail("SAGO_REQUIRE_BROWSER=1 but no chromium on PATH (apt-get install chromium)")
    pytest.skip("no headless Chromium on this machine (apt-get install chromium)")


def _run(args: list[str], profile: Path) -> str:
    done = subprocess.run(
        [chromium(), *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout


def figures_as_loaded(page: Path, work: Path) -> list[tuple[str, bool, int, int]]:
    """(id, complete, natural width, natural height) of every image, as Chromium decoded it."""
    probe = work / "probe.html"
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"))
    dom = _run(["--dump-dom", probe.as_uri()], work / "profile")
    found = re.search(r'data-figures="([^"]*)"', dom)
    assert found, "the page never finished loading in Chromium"
    return [tuple(item) for item in json.loads(unescape(found.group(1)))]


def screenshot(page: Path, out: Path, work: Path) -> Path:
    _run(
        [f"--screenshot={out}", "--window-size=1280,5000", "--hide-scrollbars", page.as_uri()],
        work / "profile",
    )
    return out


def probe(
    page: Path,
    script: str,
    attribute: str,
    work: Path,
    width: int = 1280,
    budget_ms: int | None = None,
) -> str:
    """Open a copy of ``page`` (beside it, so its relative links resolve) with ``script``
    added before ``</body>``, and return what the script wrote to ``data-<attribute>`` on
    the page (HTML-unescaped); ``budget_ms`` replaces the virtual time budget."""
    probed = page.with_name(f"probe-{work.name}-{page.name}")
    probed.write_text(page.read_text(encoding="utf-8").replace("</body>", script + "</body>"))
    flags = FLAGS if budget_ms is None else [*FLAGS[:-1], f"--virtual-time-budget={budget_ms}"]
    try:
        done = subprocess.run(
            [
                chromium(),
                *flags,
                f"--window-size={width},900",
                f"--user-data-dir={work / 'profile'}",
                "--dump-dom",
                probed.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
    finally:
        probed.unlink(missing_ok=True)
    found = re.search(rf'data-{attribute}="([^"]*)"', done.stdout)
    assert found, f"the page never finished loading in Chromium: {done.stderr[-2000:]}"
    return unescape(found.group(1))


def probe_json(page: Path, script: str, attribute: str, work: Path, width: int = 1280) -> dict:
    """``probe`` for a script that records a JSON object (and ``error`` when it failed)."""
    seen = json.loads(probe(page, script, attribute, work, width))
    assert "error" not in seen, seen.get("error")
    return dict(seen)
