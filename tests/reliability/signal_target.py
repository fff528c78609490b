"""One `sago run` (or `sago resume`) on the ``mock:`` backend that pauses at a chosen point,
for ``test_signals.py`` to stop it there with SIGTERM or SIGINT.

    python -m tests.reliability.signal_target run CONFIG CALLS POINT HIT MARKER
    python -m tests.reliability.signal_target resume RUN CALLS

As ``target.py`` (its backend, word-overlap scorer and call log), except that the HIT-th
time the run reaches POINT it writes MARKER (JSON: its pid, and a child's) and sleeps, as a
busy engine or a slow upload would, until a signal stops it:

    generation  inside a generation batch, after the backend was asked
    scoring     inside the teacher-forced scoring pass (the analysis of a shard)
    upload      inside the put of a shard's generations to the runs store
    stubborn    inside a generation batch, with a child process that ignores SIGTERM
                (an engine worker that does not stop when asked)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tests.reliability import target

POINTS = ("generation", "scoring", "upload", "stubborn")
PAUSE_S = 120.0
STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"
_hits: Counter[str] = Counter()


def pause_at(point: str, hit: int, marker: Path) -> None:
    """Hook the pause at ``point`` into the mock backend's observers or the store's put."""
    from sago_core.backends.mock import MockBackend
    from sago_core.storage.objects import ObjectStore

    def pause(reached: str) -> None:
        _hits[reached] += 1
        if _hits[reached] != hit:
            return
        child = None
        if point == "stubborn":
            child = subprocess.Popen([sys.executable, "-c", STUBBORN]).pid
        marker.write_text(json.dumps({"pid": os.getpid(), "child": child}))
        time.sleep(PAUSE_S)

    def observe(kind: str, prompt: str) -> None:
        wanted = "score" if point == "scoring" else "generate"
        if point != "upload" and kind == wanted:
            pause(point)

    MockBackend.observers.append(observe)
    real_put = ObjectStore._put

    def put(self: ObjectStore, key: str, data: bytes, mode: Any) -> str | None:
        if point == "upload" and key.endswith("/generations.parquet") and "/shards/" in key:
            pause(point)
        return real_put(self, key, data, mode)

    target._patch(ObjectStore, "_put", put)


def main(argv: list[str]) -> int:
    from sago_cli.main import main as sago
    from sago_core.config import read_config_file
    from sago_core.storage.location import is_url, parse_store_url

    if argv[0] == "resume":  # resume RUN CALLS
        run = argv[1]
        runs = parse_store_url(run).parent().scratch() if is_url(run) else Path(run).parent
        target.install(Path(argv[2]), runs)
        return sago(["resume", run])
    config, calls, point, hit, marker = argv[1:6]
    assert point in POINTS, point
    runs_dir = str(read_config_file(Path(config))["runs_dir"])
    target.install(
        Path(calls), parse_store_url(runs_dir).scratch() if is_url(runs_dir) else Path(runs_dir)
    )
    pause_at(point, int(hit), Path(marker))
    return sago(["run", "--config", config])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
