"""The moto S3 server, one request at a time: ``python serial_moto.py HOST PORT``.

S3 applies a conditional put (``If-Match``, ``If-None-Match: *``) atomically. moto checks
the condition and then writes, without a lock between (``moto/s3/responses.py``,
``put_object``), so two threads of its threaded server can both pass one condition and one
of the two writes is lost: a test of sago's compare-and-swap append would then fail on
moto's race, not sago's. Here every request runs under one lock (its response read whole
inside it); connections are still served in threads, so keep-alive clients do not wait on
each other's idle sockets.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import run_simple


def one_at_a_time(app: Callable[..., Iterable[bytes]]) -> Callable[..., list[bytes]]:
    lock = threading.Lock()

    def serve(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        with lock:
            return list(app(environ, start_response))

    return serve


def main(host: str, port: int) -> None:
    os.environ.setdefault("MOTO_PORT", str(port))  # as moto_server does
    app = DomainDispatcherApplication(create_backend_app)
    run_simple(host, port, one_at_a_time(app), threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
