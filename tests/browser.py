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
