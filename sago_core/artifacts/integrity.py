"""The run folder's integrity log: cache hits whose artifact failed its recorded sha256.

The stage runner appends one JSON line per detection (path, cache key, recorded and found
hash) before it recomputes the stage; the report's provenance counts the lines by reason.
The log is the run folder's history, so a clean rerun leaves the count (and the report's
cache key) as it was.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from sago_core.artifacts.layout import RunLayout
from sago_core.artifacts.store import append_line, read_text
from sago_core.storage.attached import refresh

CHECKSUM_MISMATCH = "checksum mismatch"
# An object on the runs store whose bytes fail the sha256 it was written with.
STORE_OBJECT_CORRUPT = "store object corrupt"


def record_recomputation(layout: RunLayout, path: str, reason: str, **details: str) -> None:
    event = {"at": datetime.now(UTC).isoformat(), "path": path, "reason": reason, **details}
    append_line(layout.integrity_log, json.dumps(event, sort_keys=True))


def integrity_counts(layout: RunLayout) -> dict[str, int]:
    """Recomputations recorded in this run folder, by reason."""
    counts: dict[str, int] = {}
    refresh(layout.integrity_log)  # on a runs store: what workers recorded too
    try:
        lines = read_text(layout.integrity_log).splitlines()
    except FileNotFoundError:
        return counts
    for line in lines:
        try:
            reason = str(json.loads(line)["reason"])
        except (ValueError, KeyError, TypeError):
            continue  # a torn line
        counts[reason] = counts.get(reason, 0) + 1
    return dict(sorted(counts.items()))
