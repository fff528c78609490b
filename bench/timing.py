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

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started

    def write(self, path: Path, **extra: object) -> None:
        peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        payload = {"seconds": self.seconds, "peak_rss_mib": peak_kib / 1024, **extra}
        path.write_text(json.dumps(payload, indent=2))
