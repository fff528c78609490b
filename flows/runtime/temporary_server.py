"""sago's temporary Prefect server: the one Prefect starts for a run without PREFECT_API_URL
(``SubprocessASGIServer``, "Starting temporary server on ..."), started in a session of its
own.

Prefect starts it as a plain child, in the terminal's foreground process group, so a Ctrl-C
reached the server at the same moment as the run: the server died first, and the run then
spent minutes retrying its requests before it ended with an ``httpx.ConnectError`` traceback.
In a session of its own the server hears no terminal signal; the run stops it itself, last,
after its flow run is marked and its workers are gone (``flows.runtime.stopping``).

Registered as Prefect's default temporary server, it is started by Prefect's own client on
first use (the same port search, health wait and settings), from whichever thread asks first.
Importing this module imports Prefect's server application: only a run that needs the
server does.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import prefect
from prefect.server.api.server import SubprocessASGIServer
from prefect.settings import PREFECT_API_URL, get_current_settings

# What Prefect's temporary server runs with (``SubprocessASGIServer._run_uvicorn_command``).
EPHEMERAL_ENV = {
    "PREFECT_UI_ENABLED": "0",
    "PREFECT__SERVER_EPHEMERAL": "1",
    "PREFECT__SERVER_FINAL": "1",
}


class SessionServer(SubprocessASGIServer):
    """Prefect's temporary server, its process the leader of a session of its own."""

    def uvicorn_command(self) -> list[str]:
        """Prefect's command for its temporary server (uvicorn over ``create_app``)."""
        return [
            sys.executable,
            "-m",
            "uvicorn",
            "--app-dir",
            str(prefect.__module_path__.parent),
            "--factory",
            "prefect.server.api.server:create_app",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--log-level",
            "error",
            "--lifespan",
            "on",
        ]

    def _run_uvicorn_command(self) -> subprocess.Popen[Any]:
        return subprocess.Popen(
            args=self.uvicorn_command(),
            env={
                **os.environ,
                **EPHEMERAL_ENV,
                **get_current_settings().to_environment_variables(exclude_unset=True),
            },
            start_new_session=True,
        )

    @property
    def pid(self) -> int | None:
        """The server's process id (its session's and process group's too), while it runs."""
        process = self.server_process
        return None if process is None or process.poll() is not None else process.pid


def own_temporary_server() -> SessionServer | None:
    """sago's temporary server, registered as the one Prefect's client starts when it first
    needs an API (nothing starts here). None where this process talks to a server of its own
    (PREFECT_API_URL) or already has a temporary server (a test harness's, an earlier run's
    in this process): that one is left as it is."""
    if PREFECT_API_URL.value():
        return None
    existing = SubprocessASGIServer._instances.get(None)
    if existing is not None:
        return existing if isinstance(existing, SessionServer) else None
    return SessionServer()
