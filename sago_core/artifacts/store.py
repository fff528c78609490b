"""Artifact writes and reads, and content hashes.

Every write is atomic (temp file, fsync, rename: ``sago_core.storage.atomic``) and, when
this process's runs folder is mirrored to an object store, also put there as one whole
object. A full or read-only disk is a ``DiskWriteError`` naming the file and the space left;
nothing partial stays (an appended line is cut back), and a rerun after space is freed
reuses every finished stage.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from sago_core.artifacts.schemas import Schema, conform
from sago_core.storage import attached
from sago_core.storage.atomic import (
    DiskWriteError,
    disk_full,
    free_bytes,
    sweep_orphaned_temps,
    write_local_bytes,
)

__all__ = [
    "DiskWriteError",
    "append_line",
    "atomic_write_bytes",
    "free_bytes",
    "read_parquet",
    "read_text",
    "sha256_of",
    "sweep_orphaned_temps",
    "write_json",
    "write_local_bytes",
    "write_parquet",
    "write_text",
]


def atomic_write_bytes(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically, and to the attached object store if any."""
    write_local_bytes(path, data)
    mirror = attached.current()
    if mirror is not None:
        mirror.push(path, data)
    return path


def append_line(path: Path, line: str) -> None:
    """Append one line and fsync; a failed append is cut back, never left half-written."""
    data = (line + "\n").encode("utf-8")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            start = os.fstat(fd).st_size
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            except BaseException:
                os.ftruncate(fd, start)
                raise
        finally:
            os.close(fd)
    except OSError as exc:
        if disk_full(exc):
            raise DiskWriteError(path, exc) from exc
        raise
    mirror = attached.current()
    if mirror is not None:
        mirror.append(path, line)


def write_parquet(frame: pl.DataFrame, path: Path, schema: Schema) -> Path:
    """Write ``frame`` conformed to ``schema``; deterministic bytes for equal content."""
    buffer = io.BytesIO()
    conform(frame, schema).write_parquet(buffer, compression="zstd", statistics=False)
    return atomic_write_bytes(path, buffer.getvalue())


def write_json(payload: Any, path: Path) -> Path:
    text = json.dumps(payload, indent=2, sort_keys=True, default=str) + "\n"
    return atomic_write_bytes(path, text.encode("utf-8"))


def write_text(text: str, path: Path) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def read_parquet(path: str | Path, columns: Sequence[str] | None = None) -> pl.DataFrame:
    """The artifact, or only its ``columns`` (Parquet is stored by column: the others are
    never read nor decompressed); a named column the file lacks (written before the
    column existed) is left out, for the reader to handle as it does for older runs."""
    attached.ensure_local(path)  # a file another machine wrote: fetched (verified) first
    if columns is None:
        return pl.read_parquet(path)
    present = pl.read_parquet_schema(path)
    return pl.read_parquet(path, columns=[c for c in columns if c in present])


def read_text(path: str | Path) -> str:
    """A text artifact (JSON, Markdown), fetched from the attached store if not local."""
    attached.ensure_local(path)
    return Path(path).read_text(encoding="utf-8")


def sha256_of(path: str | Path) -> str:
    attached.ensure_local(path)  # a cache key over a file another machine made
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()
