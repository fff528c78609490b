"""Flow-side plumbing: run one stage task, time it, note cache hits, record its artifact.

Results are JSON records in the run folder (``JsonResultStorage``); each stage runs under a
lock on its cache key (``ProcessLockManager``), so concurrent runs on one folder share work.

A cached result whose artifact file has since vanished (a folder deleted by hand) is
recomputed with ``refresh_cache`` instead of handing a dangling path downstream.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from flows.runtime.process_locks import ProcessLockManager
from flows.runtime.result_storage import JsonResultStorage
from sago_core.artifacts.layout import RunLayout
from sago_core.artifacts.store import sha256_of, sweep_orphaned_temps


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
        # Runs on one folder share these locks: each cached stage is computed once.
        self.locks = ProcessLockManager(layout.results / ".locks")
        self.records: list[dict[str, Any]] = []
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
        configured = stage.with_options(
            result_storage=self.storage,
            cache_policy=stage.cache_policy.configure(
                isolation_level="SERIALIZABLE", lock_manager=self.locks
            ),
        )
        with tags(*(run_tags or [])):
            state = configured(**parameters, return_state=True)
            path = state.result()
            cached = state.name == "Cached"
            if not Path(path).exists():
                refreshed = configured.with_options(refresh_cache=True)
                state = refreshed(**parameters, return_state=True)
                path, cached = state.result(), False
        committed = commit_if is None or commit_if(str(path))
        if not committed:
            self._withdraw(state)
        record = self._record(label or stage.name, path, cached, started)
        self.records.append({**record, "committed": committed})
        self.last_cached = cached
        return str(path)

    def _withdraw(self, state: Any) -> None:
        key = getattr(getattr(state.data, "metadata", None), "storage_key", None)
        if key:
            (Path(str(self.storage.basepath)) / key).unlink(missing_ok=True)

    def note(self, stage: str, path: str, cached: bool, **extra: Any) -> None:
        """Record an artifact another process made (a shard served by a GPU worker)."""
        record = self._record(stage, path, cached, time.perf_counter())
        record["seconds"] = None
        self.records.append({**record, **extra})

    def _record(self, stage: str, path: str, cached: bool, started: float) -> dict[str, Any]:
        artifact = Path(path)
        rows = pq.read_metadata(artifact).num_rows if artifact.suffix == ".parquet" else None
        return {
            "stage": stage,
            "path": str(artifact.relative_to(self.run_dir)),
            "sha256": sha256_of(artifact),
            "rows": rows,
            "cache_hit": cached,
            "seconds": round(time.perf_counter() - started, 3),
        }
