"""Which devices a run spreads its shards over, and how workers own groups of them."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest

from sago_core.errors import ConfigError


def test_devices_come_from_the_visible_gpus(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from sago.flows.runtime.devices import device_ids

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert device_ids(2) == ["2", "3"] and device_ids("auto") == ["2", "3"]
    assert device_ids(1) == ["2"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert device_ids("auto") == ["cpu"] and device_ids(2) == ["0", "1"]


def test_workers_own_consecutive_groups_of_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    from sago.flows.runtime.devices import worker_devices

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    assert worker_devices(4) == ["0", "1", "2", "3"]  # one device per worker (the default)
    assert worker_devices(4, 2) == ["0,1", "2,3"]
    assert worker_devices(4, 4) == ["0,1,2,3"]
    assert worker_devices(2, 2) == ["0,1"]  # the first two GPUs this process may use
    assert worker_devices("auto", 2) == ["0,1", "2,3"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7,1")
    assert worker_devices(4, 2) == ["4,5", "6,7"]  # the process's own order, not sorted
    assert worker_devices("auto", 2) == ["4,5", "6,7"]  # "auto": whole groups; 1 stays idle


def test_auto_without_gpus_is_the_cpu_alone_and_counts_must_fit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from sago.flows.runtime.devices import worker_devices

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert worker_devices("auto", 2) == ["cpu"]
    assert worker_devices(4, 2) == ["0,1", "2,3"]  # CPU-only machines, tests: plain indexes
    with pytest.raises(ConfigError, match="multiple of devices_per_worker"):
        worker_devices(3, 2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    with pytest.raises(ConfigError, match="only 1 GPU"):
        worker_devices("auto", 2)
    with pytest.raises(ConfigError, match=">= 1"):
        worker_devices(2, 0)


def test_a_group_is_its_members() -> None:
    from sago.flows.runtime.devices import group_members

    assert group_members("2,3") == ["2", "3"] and group_members(" 1 ") == ["1"]
    assert group_members("") == ["cpu"] and group_members("-1") == ["cpu"]
    assert group_members("cpu") == ["cpu"]


def _hold(group: str, tmp: str, seconds: float, ready) -> None:  # type: ignore[no-untyped-def]
    import os

    os.environ["TMPDIR"] = tmp
    import tempfile

    tempfile.tempdir = None
    from sago.flows.runtime.devices import device_lock

    with device_lock(group):
        ready.set()
        time.sleep(seconds)


def test_a_group_lock_holds_each_of_its_devices(tmp_path: Path) -> None:
    """A worker on "0,1" keeps out a worker on "1" (a run with another grouping) until it
    is done; one on "2" is not held up."""
    import os
    import tempfile

    context = multiprocessing.get_context("spawn")
    ready = context.Event()
    holder = context.Process(target=_hold, args=("0,1", str(tmp_path), 1.5, ready))
    holder.start()
    assert ready.wait(60)
    old = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(tmp_path)
    tempfile.tempdir = None
    try:
        from sago.flows.runtime.devices import device_lock

        started = time.monotonic()
        with device_lock("2"):
            free = time.monotonic() - started
        with device_lock("1"):
            waited = time.monotonic() - started
    finally:
        if old is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = old
        tempfile.tempdir = None
        holder.join(30)
    assert free < 0.5 and waited > 0.8
    assert sorted(p.name for p in (tmp_path / "sago-devices").iterdir()) == [
        "device-0.lock",
        "device-1.lock",
        "device-2.lock",
    ]
