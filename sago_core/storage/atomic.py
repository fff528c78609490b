"""Atomic local writes (temp file, fsync, rename), below everything that writes a file.

A reader never sees a half-written file: the temp file lives in the same folder and is
renamed over the target only after its bytes reach the disk. A temp file's name carries its
writer (host digest and process id), so a process killed between write and rename (kill -9
runs no cleanup) leaves a file the next run can recognise as orphaned and remove, without
touching the temp file of a writer that is still alive.

A full or read-only disk (ENOSPC, EDQUOT, EROFS) while writing is a ``DiskWriteError``
naming the file and the space left; the temp file is removed, so nothing partial stays.
The artifact functions (``sago_core.artifacts.store``) and the store mirror
(``sago_core.storage.mirror``) both write through here.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import socket
import tempfile
from pathlib import Path

from sago_core.errors import SagoError

DISK_FULL = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "the file system is read-only",
}


class DiskWriteError(SagoError):
    """A write failed because the disk is full or read-only; nothing partial was left."""

    def __init__(self, path: Path, cause: OSError) -> None:
        self.path = path
        self.free_bytes = free_bytes(path)
        free = "unknown" if self.free_bytes is None else f"{self.free_bytes / 2**20:.1f} MiB"
        super().__init__(
            f"cannot write {path}: {DISK_FULL[cause.errno or 0]} ({free} free there); no "
            "partial file was left. Free space (or make it writable) and run the same command "
            "again: every finished stage is reused"
        )


def free_bytes(path: Path) -> int | None:
    """Free bytes on the file system holding ``path`` (its nearest existing folder)."""
    for folder in (path, *path.parents):
        if folder.exists():
            try:
                return shutil.disk_usage(folder).free
            except OSError:
                return None
    return None


def disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in DISK_FULL


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


_HOST = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
_TEMP = re.compile(r"\.w(?P<host>[0-9a-f]{8})-(?P<pid>\d+)\.[^/]*\.tmp$")


def _writer_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    return True


def sweep_orphaned_temps(root: Path) -> list[Path]:
    """Remove temp files under ``root`` whose writer on this host has died; returns them."""
    removed = []
    for path in root.rglob("*.tmp") if root.is_dir() else []:
        found = _TEMP.search(path.name)
        if found and found["host"] == _HOST and not _writer_alive(int(found["pid"])):
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def write_local_bytes(path: Path, data: bytes) -> Path:
    """Temp file in the same folder, fsync, rename: a reader sees the old file or the new."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        writer = f"w{_HOST}-{os.getpid()}"
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{writer}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        if disk_full(exc):
            raise DiskWriteError(path, exc) from exc
        raise
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; artifacts are for sharing
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if disk_full(exc):
            raise DiskWriteError(path, exc) from exc  # type: ignore[arg-type]
        raise
    return path
