"""Where Prefect keeps stage results: JSON only, written atomically.

Prefect deserialises a stored result with whatever serializer the stored record names, and
it does so even to check whether a cached result exists. A record planted in (or corrupted
into) the results folder that names ``pickle`` would run code on the next cache lookup. This
storage refuses to hand such a record to Prefect: it reads as absent, so the stage runs again
and overwrites it. Writes go through a temp file and a rename, so a killed process leaves
either the old record or the new one, never half of one. A record that cannot be written
for want of disk stops the run (``raise_write_failure``) instead of being logged and skipped.
"""

from __future__ import annotations

import json
from pathlib import Path

from prefect._internal.compatibility.async_dispatch import async_dispatch
from prefect.filesystems import LocalFileSystem

from sago_core.artifacts.store import DiskWriteError, atomic_write_bytes
from sago_core.storage.attached import ensure_local
from sago_core.storage.objects import StoreError

ALLOWED_SERIALIZER = "json"


class UnsafeResultRecord(ValueError):
    """A stored result record that is not plain JSON with the JSON serializer."""


def check_result_record(content: bytes, where: str) -> bytes:
    try:
        record = json.loads(content)
        serializer = record["metadata"]["serializer"]["type"]
    except (ValueError, KeyError, TypeError) as exc:
        raise UnsafeResultRecord(f"{where}: not a JSON result record") from exc
    if serializer != ALLOWED_SERIALIZER:
        raise UnsafeResultRecord(
            f"{where}: result record names serializer {serializer!r}; only "
            f"{ALLOWED_SERIALIZER!r} is read"
        )
    return content


class JsonResultStorage(LocalFileSystem):
    """A local results folder that only ever yields JSON-serialised records."""

    _block_type_name = "Sago JSON Result Storage"
    _block_type_slug = "sago-json-result-storage"

    # Prefect's base class types these as coroutines; async_dispatch serves both worlds, so
    # the synchronous signatures below are the ones callers see.
    async def aread_path(self, path: str) -> bytes:
        return self.read_path(path, _sync=True)  # type: ignore[call-arg,return-value]

    @async_dispatch(aread_path)
    def read_path(self, path: str) -> bytes:  # type: ignore[override]
        resolved = Path(self._resolve_path(path))
        ensure_local(resolved)  # on an object store: a record another machine committed
        if not resolved.is_file():
            raise ValueError(f"Path {resolved} does not exist or is not a file.")
        return check_result_record(resolved.read_bytes(), str(resolved))

    async def awrite_path(self, path: str, content: bytes) -> str:
        return self.write_path(path, content, _sync=True)  # type: ignore[call-arg,return-value]

    @async_dispatch(awrite_path)
    def write_path(self, path: str, content: bytes) -> str:  # type: ignore[override]
        resolved = Path(self._resolve_path(path))
        try:
            atomic_write_bytes(resolved, content)
        except (DiskWriteError, StoreError) as exc:
            _write_failures.append(exc)  # Prefect logs a failed commit and carries on
            raise
        return str(resolved)


_write_failures: list[DiskWriteError | StoreError] = []


def raise_write_failure() -> None:
    """Raise the first result record that could not be written for want of disk (Prefect
    only logs a failed commit, and the run would go on without its records)."""
    if _write_failures:
        failure = _write_failures[0]
        _write_failures.clear()
        raise failure
