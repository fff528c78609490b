"""A real Prefect server on 127.0.0.1 with a temporary home and SQLite database."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PREFECT = str(Path(sys.executable).with_name("prefect"))
# A test server does not serve the UI (as Prefect's own ephemeral server). Its services stay:
# the repossessor, for one, frees the concurrency leases of a run killed mid-stage.
LEAN_SERVER = {"PREFECT_UI_ENABLED": "false"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def prefect_server(
    home: Path,
    startup_s: float = 180,
    server_env: dict[str, str] | None = None,
    log: Path | None = None,
) -> Iterator[dict[str, str]]:
    """Start ``prefect server start``; yield the environment a client process needs.
    ``server_env``: more settings for the server alone (they win over the defaults here);
    ``log``: where its output goes (discarded without)."""
    port = free_port()
    env = {
        **os.environ,
        "PREFECT_HOME": str(home),
        "PREFECT_API_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{home}/prefect.db",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_API_URL": f"http://127.0.0.1:{port}/api",
        "PREFECT_LOGGING_LEVEL": "WARNING",
        "SAGO_HOME": str(ROOT),
        "PYTHONPATH": str(ROOT),
    }
    with open(log, "ab") if log else contextlib.nullcontext(subprocess.DEVNULL) as out:
        process = subprocess.Popen(
            [PREFECT, "server", "start", "--host", "127.0.0.1", "--port", str(port)],
            env={**env, **LEAN_SERVER, **(server_env or {})},
            stdout=out,
            stderr=out,
            start_new_session=True,
        )
    try:
        deadline = time.time() + startup_s
        while True:
            try:
                with urllib.request.urlopen(f"{env['PREFECT_API_URL']}/health", timeout=2):
                    break
            except OSError as exc:
                if time.time() > deadline or process.poll() is not None:
                    raise RuntimeError(f"no Prefect server within {startup_s:.0f} s") from exc
                time.sleep(0.2)
        yield env
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)


def run_sago(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The sago command line in a fresh process with ``env``."""
    return subprocess.run(
        [sys.executable, "-m", "sago_cli", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
