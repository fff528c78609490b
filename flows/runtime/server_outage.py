"""Riding out a Prefect server that stops and comes back (an upgrade, a crash, a failover).

Prefect's client retries a request that loses a connection it had made (``PREFECT_CLIENT_
MAX_RETRIES`` times, back-off 2, 4, 8 ... s, logged at debug level only), but a client that
has not connected yet fails at once: each shard's first request (its tag concurrency slots)
comes from a new client, so a server that is down at that moment ended the run with a
``ConcurrencySlotAcquisitionError`` traceback. Here a stage call that fails because the
server cannot be reached waits for the server's ``/health`` with a bounded back-off, logged
as a warning each time (``sago.server``), and runs the stage again: a stage that had
finished is a cache hit (its result record lives in the run folder, not on the server).
After ``SAGO_SERVER_WAIT_S`` seconds (default 600) without the server the run stops with
``PrefectServerUnavailable``, whose message says how to resume; nothing finished is lost.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx

from sago_core.errors import ConfigError, SagoError

LOG = logging.getLogger("sago.server")
WAIT_ENV = "SAGO_SERVER_WAIT_S"
DEFAULT_WAIT_S = 600.0
FIRST_DELAY_S, MAX_DELAY_S = 1.0, 15.0
# What a request to a server that is down (or going down, or restarting) raises.
UNREACHABLE = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.ReadError,
    httpx.WriteError,
    httpx.RemoteProtocolError,
    ConnectionError,
)
T = TypeVar("T")


class PrefectServerUnavailable(SagoError):
    """The server stayed away longer than the wait allows; the run can be resumed."""


def wait_limit_s() -> float:
    """``SAGO_SERVER_WAIT_S``: how long a run waits for its server (0: not at all)."""
    text = os.environ.get(WAIT_ENV)
    if text is None or not text.strip():
        return DEFAULT_WAIT_S
    try:
        value = float(text)
    except ValueError as exc:
        raise ConfigError(f"{WAIT_ENV}={text!r} is not a number of seconds") from exc
    if not value >= 0:
        raise ConfigError(f"{WAIT_ENV}={text!r} must be 0 or more seconds")
    return value


def api_url() -> str | None:
    """The server this process talks to (None: an ephemeral one inside this process)."""
    url = os.environ.get("PREFECT_API_URL", "").strip()
    return url.rstrip("/") or None


def unreachable(exc: BaseException) -> BaseException | None:
    """The connection error behind ``exc`` (its causes and contexts), if there is one."""
    return _chained(exc, UNREACHABLE)


def outage(exc: BaseException) -> tuple[str, BaseException] | None:
    """(the server's URL, the connection error) when ``exc`` is a lost server, else None."""
    url, cause = api_url(), unreachable(exc)
    return None if url is None or cause is None else (url, cause)


def healthy(url: str, timeout_s: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=timeout_s) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def resume_hint(run_dir: Path | str) -> str:
    return f"every finished stage is kept: run `sago resume {run_dir}` once the server is back"


def wait_for_server(
    url: str, what: str, cause: BaseException, run_dir: Path | str, since: float
) -> None:
    """Back off (1, 2, 4, 8, 15, 15 ... s, the last one cut to the limit) until ``url``
    answers, logging each wait; once ``SAGO_SERVER_WAIT_S`` have passed ``since`` (the first
    failure, monotonic) raise ``PrefectServerUnavailable``."""
    limit = wait_limit_s()
    delay, attempt = FIRST_DELAY_S, 0
    while attempt == 0 or not healthy(url):
        waited = time.monotonic() - since
        if waited >= limit:
            raise PrefectServerUnavailable(
                f"the Prefect server at {url} was unreachable for {waited:.0f} s during "
                f"{what} (limit {limit:.0f} s, {WAIT_ENV}); {resume_hint(run_dir)}"
            ) from cause
        attempt += 1
        pause = min(delay, limit - waited)
        LOG.warning(
            "Prefect server %s unreachable during %s (%s: %s); retry %d in %.0f s "
            "(waited %.0f of %.0f s)",
            url,
            what,
            type(cause).__name__,
            cause,
            attempt,
            pause,
            waited,
            limit,
        )
        time.sleep(pause)
        delay = min(2 * delay, MAX_DELAY_S)
    LOG.warning(
        "Prefect server %s is back after %.0f s; running %s again",
        url,
        time.monotonic() - since,
        what,
    )


def through_outages(
    call: Callable[..., T], what: str, run_dir: Path | str, /, *args: Any, **kwargs: Any
) -> T:
    """``call(*args, **kwargs)``, called again after each outage of the server it needs
    (one wait limit from the first failure on, however often the call fails)."""
    since: float | None = None
    while True:
        try:
            return call(*args, **kwargs)
        except Exception as exc:
            lost = outage(exc)
            if lost is None:
                raise
            since = time.monotonic() if since is None else since
            url, cause = lost
            wait_for_server(url, what, cause, run_dir, since)


@contextlib.contextmanager
def resumable_outage(run_dir: Path | str) -> Iterator[None]:
    """A run that lost its server outside a stage (or for too long) ends with one message
    that says how to resume, not a traceback."""
    try:
        yield
    except SagoError:
        raise
    except Exception as exc:
        chained = _chained(exc, PrefectServerUnavailable)
        if isinstance(chained, PrefectServerUnavailable):
            raise chained from exc
        lost = outage(exc)
        if lost is None:
            raise
        url, cause = lost
        raise PrefectServerUnavailable(
            f"lost the Prefect server at {url} ({type(cause).__name__}: {cause}); "
            f"{resume_hint(run_dir)}"
        ) from exc


def _chained(
    exc: BaseException, kind: type[BaseException] | tuple[type[BaseException], ...]
) -> BaseException | None:
    """The first of ``exc``, its cause or context (and theirs) that is a ``kind``."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, kind):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def best_effort(call: Callable[..., T], what: str, /, *args: Any, **kwargs: Any) -> T | None:
    """``call(...)`` for something only the UI shows (a progress artifact): while the
    server is away it is skipped with a warning instead of stopping the run."""
    try:
        return call(*args, **kwargs)
    except Exception as exc:
        lost = outage(exc)
        if lost is None:
            raise
        LOG.warning("Prefect server %s unreachable (%s): %s skipped", *lost, what)
        return None
