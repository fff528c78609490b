"""Stage timers and the result file each pipeline subprocess writes."""

from __future__ import annotations

import json
import resource
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class Stopwatch:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.peak_mib: dict[str, float] = {}  # the process's peak RSS once each stage ended

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started
            self.peak_mib[name] = peak_rss_mib()

    def write(self, path: Path, **extra: object) -> None:
        payload = {
            "seconds": self.seconds,
            "peak_rss_mib": peak_rss_mib(),
            "peak_after_mib": self.peak_mib,
            **extra,
        }
        path.write_text(json.dumps(payload, indent=2))


def peak_rss_mib() -> float:
    """This process's peak resident memory so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
