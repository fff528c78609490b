"""Where each page of the results site lives, relative to the site's folder (one owner).

```
<site>/
  index.html                   the families' trend charts and their releases
  leaderboard.html             every release, SGS per axis, regressions marked
  runs.html                    every run with its configuration
  runs/<run_id>/index.html     a run: configuration, pooled SGS, its releases and comparisons
  runs/<run_id>/report.html    copies of the run's report and card, linked back to the site
  runs/<run_id>/card.html
  runs/releases.html           the watch's comparison across every release (its card links
                               resolve beside it)
  compare/<run_id>--<model>.html   a release against the previous one: the paired verdicts
  assets/plotly.min.js         the charting library, vendored (the site is offline)
```
"""

from __future__ import annotations

import hashlib
import re
from urllib.parse import quote

from sago_core.artifacts.layout import CARD_HTML_FILE, REPORT_FILE, model_slug
from sago_core.site.collect import Release

SITE_DIR = "site"  # below a runs folder: where `sago site` and the watch put it by default
INDEX = "index.html"
LEADERBOARD = "leaderboard.html"
RUNS = "runs.html"
RELEASES = "runs/releases.html"
PLOTLY = "assets/plotly.min.js"


def run_page(run_id: str) -> str:
    return f"runs/{quote(run_id)}/index.html"


def run_report(run_id: str) -> str:
    return f"runs/{quote(run_id)}/{REPORT_FILE}"


def run_card(run_id: str) -> str:
    return f"runs/{quote(run_id)}/{CARD_HTML_FILE}"


def compare_page(release: Release) -> str:
    return f"compare/{quote(release.run_id)}--{model_slug(release.spec)}.html"


def family_id(family: str) -> str:
    """An HTML id for a family (its name holds ':', '/' and '=')."""
    readable = re.sub(r"[^A-Za-z0-9]+", "-", family).strip("-")[:40]
    return f"family-{readable}-{hashlib.sha256(family.encode()).hexdigest()[:6]}"


def series_id(family: str, number: int) -> str:
    """An HTML id for a family's trend line (its number within the family)."""
    return f"{family_id(family)}-line-{number}"


def up(page: str) -> str:
    """The way from ``page`` back to the site's folder ('' at its top)."""
    return "../" * page.count("/")
