"""Flow-side plumbing: run one stage task, time it, note cache hits, record its artifact.

Results are JSON records in the run folder (``JsonResultStorage``); each stage runs under a
lock on its cache key (``ProcessLockManager``), so concurrent runs on one folder share work.
Keys place a stage's output relative to this run folder (``stage_policy``).

A cache hit is verified before its artifact is used: the artifact's sha256 must equal the
one recorded when the stage computed it (``RunLayout.checksums``). A cached result whose
artifact has vanished (a folder deleted by hand) or whose bytes changed (a truncated copy,
a disk fault, a hand edit) is logged with its path and recomputed with ``refresh_cache``
instead of handing wrong bytes downstream; a changed one is also appended to the run's
integrity log, which the report's provenance counts. The hash is the one the manifest
records anyway, so verification reads each artifact once, as before.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from sago.flows.runtime.lease_locks import LeaseLockManager
from sago.flows.runtime.object_store import attached_mirror
from sago.flows.runtime.process_locks import ProcessLockManager
from sago.flows.runtime.result_storage import JsonResultStorage, raise_write_failure
from sago.flows.runtime.server_outage import through_outages
from sago.tasks.stage import stage_policy
from sago_core.artifacts.integrity import (
    CHECKSUM_MISMATCH,
    STORE_OBJECT_CORRUPT,
    record_recomputation,
)
from sago_core.artifacts.layout import RunLayout
from sago_core.artifacts.store import read_text, sha256_of, sweep_orphaned_temps, write_json
from sago_core.storage.attached import ensure_local, remove

LOG = logging.getLogger("sago.cache")
ARTIFACT_MISSING = "artifact missing"


class StageRunner:
    def __init__(self, layout: RunLayout, storage_name: str) -> None:
        self.layout = layout
        self.run_dir = run_dir = layout.run_dir
        # What a killed run left half-written: its own folder and the shared caches.
        for folder in (run_dir, layout.cache.root):
            sweep_orphaned_temps(folder)
        storage = JsonResultStorage(basepath=str(layout.results))
        storage.save(storage_name, overwrite=True)
        self.storage = storage
        # Runs on one folder share these locks: each cached stage is computed once. On an
        # object store the folder is per machine, so the locks are leases on the store.
        self.mirror = attached_mirror(run_dir)
        self.locks: ProcessLockManager | LeaseLockManager = (
            ProcessLockManager(layout.locks)
            if self.mirror is None
            else LeaseLockManager(self.mirror.store, layout.leases_key)
        )
        self.policy = stage_policy(run_dir).configure(
            isolation_level="SERIALIZABLE", lock_manager=self.locks
        )
        self.records: list[dict[str, Any]] = []
        self.worker_requests: dict[str, dict[str, int]] = {}  # per worker process, on a store
        self.last_cached = False

    def __call__(
        self,
        stage: Any,
        label: str | None = None,
        run_tags: list[str] | None = None,
        commit_if: Callable[[str], bool] | None = None,
        **parameters: Any,
    ) -> str:
        """Run ``stage`` (tagged with ``run_tags`` in the UI) and return its artifact path.

        ``commit_if(path)`` False: the artifact is used by this run, but its cached result is
        withdrawn, so the next run computes the stage again (a shard with failed API
        requests: the answer cache serves the good ones, only the failed ones are re-asked).
        """
        from prefect import tags

        started = time.perf_counter()
        configured = stage.with_options(result_storage=self.storage, cache_policy=self.policy)
        recomputed = None
        with tags(*(run_tags or [])):
            what = f"stage {label or stage.name}"
            state = through_outages(configured, what, self.run_dir, **parameters, return_state=True)
            path = str(self.layout.localise(state.result()))
            cached = state.name == "Cached"
            digest = sha256_of(path) if ensure_local(path) else None
            if cached:
                recomputed = self._stale(state, path, digest)
            if recomputed is not None:
                refreshed = configured.with_options(refresh_cache=True)
                state = through_outages(
                    refreshed, what, self.run_dir, **parameters, return_state=True
                )
                path, cached = str(self.layout.localise(state.result())), False
                digest = sha256_of(path)
        raise_write_failure()
        key = _storage_key(state)
        if not cached and key is not None and digest is not None:
            write_json({"path": self._relative(path), "sha256": digest}, self._checksum(key))
        committed = commit_if is None or commit_if(str(path))
        if not committed:
            self._withdraw(key)
        record = self._record(label or stage.name, path, cached, started, digest)
        self.records.append(
            {**record, "cache_key": key, "committed": committed, "recomputed": recomputed}
        )
        self.last_cached = cached
        return str(path)

    def _stale(self, state: Any, path: str, digest: str | None) -> str | None:
        """Why a cache hit cannot be used (None: it can); logs a changed artifact."""
        if digest is None:
            if self.mirror is not None and self.mirror.was_corrupt(Path(path)):
                record_recomputation(self.layout, self._relative(path), STORE_OBJECT_CORRUPT)
                return STORE_OBJECT_CORRUPT
            LOG.warning("cached artifact %s is missing; recomputing its stage", path)
            return ARTIFACT_MISSING
        key = _storage_key(state)
        checksum = self._checksum(key) if key else None
        try:
            recorded = json.loads(read_text(checksum))["sha256"]  # type: ignore[arg-type]
        except (AttributeError, OSError, ValueError, KeyError, TypeError):
            # No record (a result another process committed a moment ago): this read is
            # the first, so it is recorded now and verified from the next run on.
            if checksum is not None:
                write_json({"path": self._relative(path), "sha256": digest}, checksum)
            return None
        if recorded == digest:
            return None
        LOG.warning(
            "cached artifact %s does not match its recorded sha256 (recorded %s, found %s); "
            "recomputing its stage",
            path,
            recorded[:12],
            digest[:12],
        )
        record_recomputation(
            self.layout,
            self._relative(path),
            CHECKSUM_MISMATCH,
            cache_key=str(key),
            recorded_sha256=recorded,
            found_sha256=digest,
        )
        return CHECKSUM_MISMATCH

    def _checksum(self, key: str) -> Path:
        return self.layout.checksum_record(key)

    def _relative(self, path: str | Path) -> str:
        where = Path(path)
        return (
            str(where.relative_to(self.run_dir))
            if where.is_relative_to(self.run_dir)
            else str(where)
        )

    def _withdraw(self, key: str | None) -> None:
        if key:  # from the runs store too, or the next run would fetch it back
            remove(Path(str(self.storage.basepath)) / key)
            remove(self._checksum(key))

    def store_summary(self) -> dict[str, Any] | None:
        """The runs store and the requests this process made to it so far (None: local)."""
        if self.mirror is None:
            return None
        counts = self.mirror.store.request_counts()
        workers = sum(sum(c.values()) for c in self.worker_requests.values())
        return {
            "url": self.mirror.store.location.url,
            "requests": counts,  # this process's
            "total_requests": sum(counts.values()),
            "worker_requests": dict(sorted(self.worker_requests.items())),
            "all_requests": sum(counts.values()) + workers,
            "corrupt_objects": len(self.mirror.corrupt),
        }

    def note(self, stage: str, path: str, cached: bool, **extra: Any) -> None:
        """Record an artifact another process made (a shard served by a GPU worker)."""
        record = self._record(stage, path, cached, time.perf_counter(), None)
        record["seconds"] = None
        self.records.append({**record, **extra})

    def _record(
        self, stage: str, path: str, cached: bool, started: float, digest: str | None
    ) -> dict[str, Any]:
        artifact = Path(path)
        rows = pq.read_metadata(artifact).num_rows if artifact.suffix == ".parquet" else None
        return {
            "stage": stage,
            "path": str(artifact.relative_to(self.run_dir)),
            "sha256": digest or sha256_of(artifact),
            "rows": rows,
            "cache_hit": cached,
            "seconds": round(time.perf_counter() - started, 3),
        }


def _storage_key(state: Any) -> str | None:
    key = getattr(getattr(state.data, "metadata", None), "storage_key", None)
    return str(key) if key else None
