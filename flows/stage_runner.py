"""Flow-side plumbing: run one stage task, time it, note cache hits, record its artifact.

A cached result whose artifact file has since vanished (a folder deleted by hand) is
recomputed with ``refresh_cache`` instead of handing a dangling path downstream.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from prefect.filesystems import LocalFileSystem

from sago_core.artifacts.store import sha256_of


class StageRunner:
    def __init__(self, run_dir: Path, storage_name: str) -> None:
        self.run_dir = run_dir
        storage = LocalFileSystem(basepath=str(run_dir / ".prefect-results"))
        storage.save(storage_name, overwrite=True)
        self.storage = storage
        self.records: list[dict[str, Any]] = []
        self.last_cached = False

    def __call__(
        self,
        stage: Any,
        label: str | None = None,
        run_tags: list[str] | None = None,
        **parameters: Any,
    ) -> str:
        """Run ``stage`` (tagged with ``run_tags`` in the UI) and return its artifact path."""
        from prefect import tags

        started = time.perf_counter()
        configured = stage.with_options(result_storage=self.storage)
        with tags(*(run_tags or [])):
            state = configured(**parameters, return_state=True)
            path = state.result()
            cached = state.name == "Cached"
            if not Path(path).exists():
                refreshed = configured.with_options(refresh_cache=True)
                state = refreshed(**parameters, return_state=True)
                path, cached = state.result(), False
        self.records.append(self._record(label or stage.name, path, cached, started))
        self.last_cached = cached
        return str(path)

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
