"""Cache locks shared by every process on one artifact folder, released by the kernel.

Prefect's SERIALIZABLE isolation takes a lock per cache key before it looks for a cached
result, so two runs on one folder compute each shard once: the second waits, then finds the
first one's result. Prefect's own file lock manager writes a lock file that a killed holder
(``kill -9``) never removes, and the next run would wait on it forever. Here a lock is an
``flock`` on a file: the kernel drops it when its process dies, however it dies.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import anyio.to_thread

_POLL_S = 0.05


def _poll(done: Callable[[], bool], timeout: float | None) -> bool:
    """Until ``done()`` (True) or ``timeout`` seconds (False); None waits for ever."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while not done():
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_S)
    return True


class BlockingLocks:
    """The async half of Prefect's ``LockManager`` protocol, for a lock manager whose
    blocking methods are thread-safe: each runs in a worker thread."""

    def acquire_lock(
        self,
        key: str,
        holder: str,
        acquire_timeout: float | None = None,
        hold_timeout: float | None = None,
    ) -> bool:
        raise NotImplementedError

    def wait_for_lock(self, key: str, timeout: float | None = None) -> bool:
        raise NotImplementedError

    async def aacquire_lock(
        self,
        key: str,
        holder: str,
        acquire_timeout: float | None = None,
        hold_timeout: float | None = None,
    ) -> bool:
        return await anyio.to_thread.run_sync(
            self.acquire_lock, key, holder, acquire_timeout, hold_timeout
        )

    async def await_for_lock(self, key: str, timeout: float | None = None) -> bool:
        return await anyio.to_thread.run_sync(self.wait_for_lock, key, timeout)


class ProcessLockManager(BlockingLocks):
    """Prefect ``LockManager`` over ``flock``; lock files live in ``folder`` and stay empty."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._held: dict[str, tuple[str, int]] = {}  # key -> (holder, open descriptor)
        self._guard = threading.Lock()

    def _path(self, key: str) -> Path:
        return self.folder / f"{key}.lock"

    def _try_flock(self, key: str) -> int | None:
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._path(key), os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        return fd

    def acquire_lock(
        self,
        key: str,
        holder: str,
        acquire_timeout: float | None = None,
        hold_timeout: float | None = None,
    ) -> bool:
        """Block until the lock is ours (or ``acquire_timeout`` passes: False)."""

        def take() -> bool:
            with self._guard:
                held = self._held.get(key)
                if held is not None:
                    return held[0] == holder
                fd = self._try_flock(key)
                if fd is not None:
                    self._held[key] = (holder, fd)
                return fd is not None

        return _poll(take, acquire_timeout)

    def release_lock(self, key: str, holder: str) -> None:
        with self._guard:
            held = self._held.get(key)
            if held is None or held[0] != holder:
                raise ValueError(f"lock {key!r} is not held by {holder!r}")
            del self._held[key]
            fcntl.flock(held[1], fcntl.LOCK_UN)
            os.close(held[1])

    def is_locked(self, key: str) -> bool:
        with self._guard:
            if key in self._held:
                return True
            if not self._path(key).exists():
                return False
            fd = self._try_flock(key)
            if fd is None:
                return True
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            return False

    def is_lock_holder(self, key: str, holder: str) -> bool:
        with self._guard:
            held = self._held.get(key)
            return held is not None and held[0] == holder

    def wait_for_lock(self, key: str, timeout: float | None = None) -> bool:
        return _poll(lambda: not self.is_locked(key), timeout)
