"""``sago report``: rebuild report.html of a finished run from its artifacts alone."""

from __future__ import annotations

import argparse
from typing import Any

from sago_cli.common import check_finished_run
from sago_cli.options import add_run
from sago_core.artifacts.layout import REPORT_FILE


def add_parser(commands: Any) -> None:
    report = commands.add_parser(
        "report",
        help="rebuild report.html of a finished run from its artifacts alone (no model)",
    )
    add_run(report)


def command(args: argparse.Namespace) -> int:
    from sago_core.artifacts.store import write_text
    from sago_core.report.page.html import report_from_run

    run_dir = args.run
    check_finished_run(run_dir)
    path = write_text(report_from_run(run_dir), run_dir / REPORT_FILE)
    print(f"Report: {path}")
    return 0
