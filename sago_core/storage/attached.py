"""The object store this process's runs folder is mirrored to, if any (one per process).

The artifact functions (``sago_core.artifacts.store``) consult it: a write is pushed as a
whole object after its local rename, an appended line is merged into the stored object, and
a read of a file that is not in the local scratch folder fetches it (verified) first. With
nothing attached (a local ``runs_dir``) every call here is a no-op.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol


class Mirrored(Protocol):
    root: Path

    def push(self, path: Path, data: bytes) -> None: ...

    def append(self, path: Path, line: str) -> None: ...

    def fetch(self, path: Path) -> bool: ...

    def remove(self, path: Path) -> None: ...

    def pull(self, folder: Path) -> int: ...


_current: Mirrored | None = None


def attach(mirror: Mirrored | None) -> None:
    global _current
    _current = mirror


def current() -> Mirrored | None:
    return _current


def ensure_local(path: str | Path) -> bool:
    """True when ``path`` exists locally, fetching it from the attached store if need be."""
    where = Path(path)
    if where.exists():
        return True
    mirror = _current
    return mirror is not None and mirror.fetch(where)


def pull(folder: str | Path) -> None:
    """Everything the attached store holds below ``folder``, fetched into it (a listing)."""
    if _current is not None:
        _current.pull(Path(folder))


def refresh(path: str | Path) -> None:
    """The store's copy of ``path`` if it has one, even over a local copy (files that other
    machines change at a fixed path: the ledger, the integrity log, a recomputed shard); a
    store without it leaves the local copy as it is."""
    if _current is not None:
        _current.fetch(Path(path))


def remove(path: str | Path) -> None:
    """Delete ``path`` locally and from the attached store."""
    Path(path).unlink(missing_ok=True)
    if _current is not None:
        _current.remove(Path(path))
