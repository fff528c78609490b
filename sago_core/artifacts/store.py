"""Atomic artifact writes (temp file, fsync, rename) and content hashes.

A reader never sees a half-written file: the temp file lives in the same folder and is
renamed over the target only after its bytes reach the disk.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import polars as pl

from sago_core.artifacts.schemas import Schema, conform


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def atomic_write_bytes(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; artifacts are for sharing
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)
    return path


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


def read_parquet(path: str | Path) -> pl.DataFrame:
    return pl.read_parquet(path)


def sha256_of(path: str | Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()
