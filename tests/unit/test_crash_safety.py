"""What a killed process leaves behind: its temp files are recognised and swept, its cache
locks are released by the kernel (Prefect's own file locks would stay held forever)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from sago.flows.runtime.process_locks import ProcessLockManager
from sago_core.artifacts.store import atomic_write_bytes, sweep_orphaned_temps
from sago_core.storage import atomic as store

HOLD = """
import sys, time
from pathlib import Path
from sago.flows.runtime.process_locks import ProcessLockManager
locks = ProcessLockManager(Path(sys.argv[1]))
assert locks.acquire_lock("key-1", holder="child")
print("held", flush=True)
time.sleep(600)
"""


def _killed_holder(folder: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(folder)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "held"
    os.kill(child.pid, signal.SIGKILL)
    child.wait()


def test_a_lock_held_by_a_killed_process_is_free_at_once(tmp_path: Path) -> None:
    locks = ProcessLockManager(tmp_path)
    _killed_holder(tmp_path)
    started = time.monotonic()
    assert not locks.is_locked("key-1")
    assert locks.acquire_lock("key-1", holder="parent", acquire_timeout=5)
    assert time.monotonic() - started < 2
    assert locks.is_lock_holder("key-1", "parent") and locks.is_locked("key-1")
    locks.release_lock("key-1", "parent")
    assert not locks.is_locked("key-1")


def test_a_live_holder_keeps_others_out(tmp_path: Path) -> None:
    first, second = ProcessLockManager(tmp_path), ProcessLockManager(tmp_path)
    assert first.acquire_lock("k", holder="a")
    assert second.is_locked("k")
    assert not second.acquire_lock("k", holder="b", acquire_timeout=0.3)
    first.release_lock("k", "a")
    assert second.acquire_lock("k", holder="b", acquire_timeout=1)


def test_prefects_file_lock_would_wait_on_a_dead_holder_forever(tmp_path: Path) -> None:
    """The control: Prefect's FileSystemLockManager leaves a killed holder's lock in place."""
    from prefect.locking.filesystem import FileSystemLockManager

    prefect_locks = FileSystemLockManager(tmp_path)
    script = HOLD.replace(
        "from sago.flows.runtime.process_locks import ProcessLockManager\n"
        "locks = ProcessLockManager",
        "from prefect.locking.filesystem import FileSystemLockManager\n"
        "locks = FileSystemLockManager",
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "held"
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert prefect_locks.is_locked("key-1")
    assert not prefect_locks.acquire_lock("key-1", holder="parent", acquire_timeout=1)


def test_orphaned_temp_files_are_swept_and_live_ones_kept(tmp_path: Path) -> None:
    host = store._HOST
    dead = tmp_path / "a" / f".x.parquet.w{host}-{2**22 + 12345}.abc.tmp"  # no such pid
    live = tmp_path / f".y.parquet.w{host}-{os.getpid()}.abc.tmp"
    elsewhere = tmp_path / f".z.parquet.w{'0' * 8}-{2**22 + 12345}.abc.tmp"  # another host
    foreign = tmp_path / "user-file.tmp"
    for path in (dead, live, elsewhere, foreign):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("partial")
    assert sweep_orphaned_temps(tmp_path) == [dead]
    assert not dead.exists() and live.exists() and elsewhere.exists() and foreign.exists()


def test_a_temp_file_names_its_writer(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    seen: list[str] = []
    real = os.replace

    def spy(src: str, dst: str) -> None:
        # os is one module for the process: only this write's rename is looked at
        if Path(dst) == tmp_path / "out.json":
            seen.append(Path(src).name)
        real(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    atomic_write_bytes(tmp_path / "out.json", b"{}")
    assert seen and f"w{store._HOST}-{os.getpid()}." in seen[0]
