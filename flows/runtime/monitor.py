"""What the Prefect UI (and the terminal) shows while a run works.

- a progress artifact ``sago-progress-<run>``: shards done/total, tokens generated,
  estimated time left, updated as each shard finishes;
- at the end a table artifact ``sago-summary-<run>`` (pooled SGS per model and axis with p
  and significance) and a markdown artifact ``sago-report-<run>`` linking report.html;
- a progress line on stderr for local runs.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from pathlib import Path
from uuid import UUID

import polars as pl
from prefect.artifacts import (
    create_markdown_artifact,
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)

from sago.flows.runtime.server_outage import best_effort
from sago_core.report.summary_md import significance_mark
from sago_core.vocabulary import POOLED


def artifact_key(kind: str, run_id: str) -> str:
    """Prefect artifact keys: lower-case letters, digits and dashes."""
    return f"sago-{kind}-" + re.sub(r"[^a-z0-9-]+", "-", run_id.lower()).strip("-")


class RunMonitor:
    def __init__(self, run_id: str, total_shards: int) -> None:
        self.run_id = run_id
        self.total = max(total_shards, 1)
        self.done = 0
        self.tokens = 0
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self.artifact: UUID = create_progress_artifact(  # type: ignore[assignment]
            progress=0.0,
            key=artifact_key("progress", run_id),
            description=self._describe(),
        )

    def _describe(self) -> str:
        elapsed = time.monotonic() - self.started
        left = elapsed / self.done * (self.total - self.done) if self.done else None
        eta = f"{left:.0f} s" if left is not None else "unknown"
        return f"{self.done}/{self.total} shards, {self.tokens} tokens generated, about {eta} left"

    def shard_finished(self, generations_path: str, cached: bool) -> None:
        """Called as each shard ends (from several threads when shards run on workers)."""
        with self._lock:
            self.done += 1
            if not cached:
                lengths = pl.read_parquet(generations_path, columns=["response_token_ids"])
                self.tokens += int(lengths["response_token_ids"].list.len().sum())
            text = self._describe()
            progress = 100.0 * self.done / self.total
            best_effort(
                update_progress_artifact, "a progress update", self.artifact, progress, text
            )
            end = "\n" if self.done == self.total else ""
            print(f"\r[sago] {text}", end=end, file=sys.stderr)

    def finish(self, summary_path: str, report_path: Path) -> None:
        summary = pl.read_parquet(summary_path).filter(pl.col("dataset") == POOLED)
        rows = [
            {
                "model": r["model"],
                "axis": r["axis"],
                "SGS": "NA" if r["sgs"] is None else f"{r['sgs']:.4f}",
                "p": "NA" if r["p_reference"] is None else f"{r['p_reference']:.3g}",
                "p (Holm)": "NA" if r["p_holm"] is None else f"{r['p_holm']:.3g}",
                "significant (Holm)": significance_mark(r["p_holm"]) or "no",
                "missing": r["missing_reason"] or "",
            }
            for r in summary.sort("model", "axis").iter_rows(named=True)
        ]
        best_effort(
            create_table_artifact,
            "the summary artifact",
            table=rows,
            key=artifact_key("summary", self.run_id),
            description=f"Pooled SGS per model and axis ({summary['reference'][0]})"
            if len(summary)
            else "no scores",
        )
        best_effort(
            create_markdown_artifact,
            "the report artifact",
            markdown=f"# SAGO report\n\n[report.html]({report_path.as_uri()})\n\n"
            f"Folder: `{report_path.parent}`",
            key=artifact_key("report", self.run_id),
            description="Where the self-contained report is",
        )
