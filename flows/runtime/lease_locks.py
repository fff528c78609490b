"""Stage locks for runs on an object store: Prefect's ``LockManager`` over store leases.

Workers on different machines share no ``flock``; they share the store. A stage's lock is a
lease object (``sago_core.storage.leases``) below the run's folder: one holder wins it with
a conditional create, a thread renews it while the stage runs, and the lease of a worker
that died expires after ``ttl_s`` and is taken over by the next one, so two workers never
compute one shard and a dead one blocks nobody for longer than its lease.
"""

from __future__ import annotations

import logging
import threading
import time

from sago.flows.runtime.process_locks import BlockingLocks
from sago_core.storage.leases import DEFAULT_TTL_S, Lease, is_held, release, renew, try_acquire
from sago_core.storage.objects import ObjectStore, StoreError

LOG = logging.getLogger("sago.store")
_POLL_S = 0.25
_MAX_POLL_S = 2.0


class LeaseLockManager(BlockingLocks):
    def __init__(self, store: ObjectStore, prefix: str, ttl_s: float = DEFAULT_TTL_S) -> None:
        self.store, self.prefix, self.ttl_s = store, prefix.strip("/"), ttl_s
        self._held: dict[str, Lease] = {}
        self._guard = threading.Lock()
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}.lease"

    def _renew_held(self) -> None:
        while not self._stop.wait(self.ttl_s / 4):
            with self._guard:
                leases = list(self._held.values())
            for lease in leases:
                try:
                    if not renew(self.store, lease, self.ttl_s):
                        LOG.warning("lease %s was lost (expired and taken over)", lease.key)
                except StoreError as exc:  # a network blip: the next round tries again
                    LOG.warning("could not renew lease %s: %s", lease.key, exc)

    def close(self) -> None:
        """Stop renewing (leases still held then expire after ``ttl_s``)."""
        self._stop.set()

    def _start_renewer(self) -> None:
        if self._renewer is None or not self._renewer.is_alive():
            self._renewer = threading.Thread(target=self._renew_held, daemon=True)
            self._renewer.start()

    def acquire_lock(
        self,
        key: str,
        holder: str,
        acquire_timeout: float | None = None,
        hold_timeout: float | None = None,
    ) -> bool:
        deadline = None if acquire_timeout is None else time.monotonic() + acquire_timeout
        wait = _POLL_S
        while True:
            with self._guard:
                held = self._held.get(key)
            if held is not None and held.holder == holder:
                return True
            if held is None:  # another holder in this process: wait for it, as for others
                lease = try_acquire(self.store, self._key(key), holder, self.ttl_s)
                if lease is not None:
                    with self._guard:
                        self._held[key] = lease
                    self._start_renewer()
                    return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(wait)
            wait = min(wait * 2, _MAX_POLL_S)  # a long wait costs few requests

    def release_lock(self, key: str, holder: str) -> None:
        with self._guard:
            held = self._held.get(key)
            if held is None or held.holder != holder:
                raise ValueError(f"lock {key!r} is not held by {holder!r}")
            del self._held[key]
        release(self.store, held)

    def is_locked(self, key: str) -> bool:
        with self._guard:
            if key in self._held:
                return True
        return is_held(self.store, self._key(key))

    def is_lock_holder(self, key: str, holder: str) -> bool:
        with self._guard:
            held = self._held.get(key)
            return held is not None and held.holder == holder

    def wait_for_lock(self, key: str, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.is_locked(key):
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(_POLL_S)
        return True
