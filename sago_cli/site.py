"""``sago site``: the static results site over a runs folder (local or on a store): the
runs with their configurations, each model family's SGS per axis across releases with its
intervals and regressions marked (one chart per design: runs of other settings are drawn
apart, with the reason), the leaderboard, and each run's report, card and
comparisons, linked both ways. Offline: plotly.js is vendored into the site."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from sago_cli.options import add_output
from sago_core.errors import InputError


def add_parser(commands: Any) -> None:
    site = commands.add_parser(
        "site",
        help="build the static results site over a runs folder: trends across releases "
        "(one chart per design), leaderboard, runs, reports, cards (offline)",
    )
    site.add_argument(
        "runs", metavar="RUNS", help="the runs folder: a path, or its store URL (s3://...)"
    )
    add_output(site, "the site (default: RUNS/site; on a store, written to the store)")
    site.add_argument(
        "--redact-unsafe",
        action="store_true",
        help="leave the model's answers to harmful requests (prompts of kind harmful) out of "
        "the copied reports and cards",
    )


def command(args: argparse.Namespace) -> int:
    from sago.flows.runtime.object_store import runs_folder
    from sago_core.progress import reporting
    from sago_core.site.address import site_address
    from sago_core.site.build import build_site
    from sago_core.site.paths import SITE_DIR
    from sago_core.storage.location import is_url

    root = runs_folder(args.runs)
    if not is_url(args.runs) and not root.is_dir():
        raise InputError("no such folder (give a runs folder or its store URL)", file=args.runs)
    with reporting("site", lambda line: print(f"[sago] {line.text}", file=sys.stderr, flush=True)):
        index = build_site(root, args.out or root / SITE_DIR, args.redact_unsafe)
    print(f"Site: {site_address(index).best}")
    return 0
