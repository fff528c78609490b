"""The wait behind server restarts, without a server: which failures it waits on, the
back-off it logs, its bound and the message that says how to resume (the real server is in
``test_server_restart.py``)."""

from __future__ import annotations

import logging
import sys
import time

import httpx
import pytest

from sago.flows.runtime import server_outage
from sago.flows.runtime.server_outage import (
    PrefectServerUnavailable,
    resumable_outage,
    through_outages,
)
from sago_core.errors import ConfigError

URL = "http://127.0.0.1:9/api"


class Clock:
    """time.monotonic and time.sleep: sleeping moves the clock."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    real_monotonic, real_sleep = time.monotonic, time.sleep

    # time is one module for the whole process: only the wait's own calls see the clock;
    # a thread an earlier test left running keeps real time
    def monotonic() -> float:
        return clock.monotonic() if _mine() else real_monotonic()

    def sleep(seconds: float) -> None:
        return clock.sleep(seconds) if _mine() else real_sleep(seconds)

    monkeypatch.setattr(server_outage.time, "monotonic", monotonic)
    monkeypatch.setattr(server_outage.time, "sleep", sleep)
    monkeypatch.setenv("PREFECT_API_URL", URL + "/")
    monkeypatch.delenv(server_outage.WAIT_ENV, raising=False)
    return clock


def _mine() -> bool:
    """Whether the caller of the patched function is the module under test."""
    return sys._getframe(2).f_globals.get("__name__") == server_outage.__name__


def _slots_error() -> Exception:
    """What a shard's first request raised on a server that was down: Prefect's error,
    caused by httpx's."""
    try:
        try:
            raise httpx.ConnectError("All connection attempts failed")
        except httpx.ConnectError as exc:
            raise RuntimeError("Unable to acquire concurrency slots") from exc
    except RuntimeError as exc:
        return exc


def _flaky(failures: int) -> tuple[list[int], object]:
    calls: list[int] = []

    def call(x: int) -> int:
        calls.append(x)
        if len(calls) <= failures:
            raise _slots_error()
        return 2 * x

    return calls, call


def test_a_stage_waits_with_a_logged_back_off_and_runs_again(
    clock: Clock, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    answers = iter([False, False, False, True])
    monkeypatch.setattr(server_outage, "healthy", lambda url: next(answers))
    calls, call = _flaky(1)
    with caplog.at_level(logging.WARNING, logger="sago.server"):
        assert through_outages(call, "stage generate", "/runs/r", 21) == 42  # type: ignore[arg-type]
    assert calls == [21, 21]
    assert clock.slept == [1.0, 2.0, 4.0, 8.0]  # doubling from 1 s
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == (
        f"Prefect server {URL} unreachable during stage generate (ConnectError: All "
        "connection attempts failed); retry 1 in 1 s (waited 0 of 600 s)"
    )
    assert lines[-1] == f"Prefect server {URL} is back after 15 s; running stage generate again"


def test_the_back_off_is_capped_and_the_wait_bounded(
    clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server_outage, "healthy", lambda url: False)
    monkeypatch.setenv(server_outage.WAIT_ENV, "100")
    calls, call = _flaky(99)
    with pytest.raises(PrefectServerUnavailable) as error:
        through_outages(call, "stage analyse", "/runs/r", 1)  # type: ignore[arg-type]
    # 1, 3, 7, 15, 30, 45, 60, 75, 90 s waited, then the 10 s left of the limit
    assert clock.slept == [1.0, 2.0, 4.0, 8.0, 15.0, 15.0, 15.0, 15.0, 15.0, 10.0]
    assert str(error.value) == (
        f"the Prefect server at {URL} was unreachable for 100 s during stage analyse (limit "
        "100 s, SAGO_SERVER_WAIT_S); every finished stage is kept: run `sago resume /runs/r` "
        "once the server is back"
    )
    assert calls == [1]


def test_one_bound_covers_a_server_that_answers_health_but_keeps_failing(
    clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server_outage, "healthy", lambda url: True)
    monkeypatch.setenv(server_outage.WAIT_ENV, "5")
    calls, call = _flaky(99)
    with pytest.raises(PrefectServerUnavailable):
        through_outages(call, "stage x", "/runs/r", 1)  # type: ignore[arg-type]
    assert clock.slept == [1.0, 1.0, 1.0, 1.0, 1.0] and len(calls) == 6


def test_other_failures_and_ephemeral_runs_do_not_wait(
    clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken() -> None:
        raise ValueError("a bug, not an outage")

    with pytest.raises(ValueError, match="a bug"):
        through_outages(broken, "stage x", "/runs/r")
    monkeypatch.delenv("PREFECT_API_URL")
    _, call = _flaky(1)
    with pytest.raises(RuntimeError, match="concurrency slots"):
        through_outages(call, "stage x", "/runs/r", 1)  # type: ignore[arg-type]
    assert clock.slept == []


def test_an_outage_outside_a_stage_ends_with_the_resume_message(clock: Clock) -> None:
    with pytest.raises(PrefectServerUnavailable) as error, resumable_outage("/runs/r"):
        raise _slots_error()
    assert str(error.value) == (
        f"lost the Prefect server at {URL} (ConnectError: All connection attempts failed); "
        "every finished stage is kept: run `sago resume /runs/r` once the server is back"
    )
    inner = PrefectServerUnavailable("waited too long")
    with pytest.raises(PrefectServerUnavailable, match="waited too long"), resumable_outage("r"):
        try:
            raise inner
        except PrefectServerUnavailable as exc:
            raise RuntimeError("the flow engine's wrapper") from exc


@pytest.mark.parametrize("value", ["soon", "-1", "nan"])
def test_a_bad_wait_limit_names_the_variable(
    value: str, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(server_outage.WAIT_ENV, value)
    with pytest.raises(ConfigError, match=f"SAGO_SERVER_WAIT_S={value!r}"):
        server_outage.wait_limit_s()
