"""A slow `sago run` (or `sago resume`) on the ``mock:`` backend, for server-restart tests.

    python -m tests.reliability.restart_target CONFIG.yaml CALLS.jsonl DELAY_S [RUN_DIR]

As ``tests.reliability.target`` (the mock backend, calls logged to CALLS.jsonl, the
word-overlap scorer), and each generated prompt takes DELAY_S seconds, so the run is still
talking to its Prefect server when a test stops that server. With RUN_DIR it runs
``sago resume RUN_DIR`` instead of ``sago run``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    config, calls, delay = Path(argv[0]), Path(argv[1]), float(argv[2])
    from sago_cli.main import main as sago
    from sago_core.backends.mock import MockBackend
    from sago_core.config import read_config_file
    from tests.reliability.target import install

    install(calls, Path(read_config_file(config)["runs_dir"]))

    def slow(kind: str, prompt: str) -> None:
        if kind == "generate":
            time.sleep(delay)

    MockBackend.observers.append(slow)
    if len(argv) == 4:
        return sago(["resume", argv[3]])
    return sago(["run", "--config", str(config)])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
