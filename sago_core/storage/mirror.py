"""A local scratch folder mirrored to an object store: push on write, fetch on read.

Every file a run writes through ``sago_core.artifacts.store`` is written locally (temp file,
fsync, rename) and then put as one whole object carrying its sha256; a killed process
leaves either no object or a whole one. A file a stage reads that is not in this machine's
scratch folder is fetched and verified first: an object whose bytes do not match its
recorded sha256 is logged, counted and not used, so the stage that made it is computed
again. Appends (the API ledger, the integrity log) are merged into the stored object with
conditional writes, so two machines appending to one file lose no line.

Never mirrored: what the owner of the folder's layout names local only (for a runs folder,
``RunLayout``'s ``local_only``: Prefect's home with its local database, weights
materialised from their sha256, lock files, since locks on a store are leases).
"""

from __future__ import annotations

import hashlib
import logging
import random
import threading
import time
from pathlib import Path

from sago_core.storage.atomic import write_local_bytes
from sago_core.storage.objects import CorruptObject, ObjectStore, StoreError

LOG = logging.getLogger("sago.store")
_APPEND_TRIES = 20
# Writers that lost a compare-and-swap wait a random while before the next try, up to twice
# as long each time: without it a dozen concurrent appenders keep colliding in step and
# one of them can spend all its tries (its line then lost to the run).
_APPEND_BACKOFF_S = (0.01, 1.0)  # the first wait's ceiling, and every wait's


class Mirror:
    def __init__(
        self,
        store: ObjectStore,
        root: Path,
        *,
        local_folders: tuple[Path, ...],
        local_names: tuple[str, ...],
    ) -> None:
        """``local_folders`` (below ``root``) and folders named ``local_names`` anywhere
        below it stay on this machine. Both are required: a mirror that forgot them would
        push the Prefect database, lock files and materialised weights to the store
        (``flows.runtime.object_store.runs_mirror`` asks RunLayout for them)."""
        self.store = store
        self.root = root.resolve()
        self.local_prefixes = tuple(
            Path(f).resolve().relative_to(self.root).as_posix() for f in local_folders
        )
        self.local_names = local_names
        self.corrupt: list[dict[str, str | None]] = []  # objects found not matching sha256
        self._guard = threading.Lock()

    def key(self, path: Path) -> str | None:
        """The object key of a local path (None: outside the mirror, or local only)."""
        try:
            relative = Path(path).resolve().relative_to(self.root).as_posix()
        except ValueError:
            return None
        if relative.startswith(self.local_prefixes) or any(
            part in self.local_names for part in relative.split("/")
        ):
            return None
        return relative

    def push(self, path: Path, data: bytes) -> None:
        key = self.key(path)
        if key is not None:
            self.store.put(key, data)

    def remove(self, path: Path) -> None:
        """Delete ``path``'s object (a withdrawn result must not come back from the store)."""
        key = self.key(path)
        if key is not None:
            self.store.delete(key)

    def fetch(self, path: Path) -> bool:
        """Download ``path`` from the store if it is there and intact (True: now local)."""
        key = self.key(path)
        if key is None:
            return False
        try:
            found = self.store.get(key)
        except CorruptObject as exc:
            LOG.warning("%s; not used, its stage is computed again", exc)
            with self._guard:
                self.corrupt.append(
                    {"key": key, "url": exc.url, "recorded": exc.recorded, "found": exc.found}
                )
            return False
        if found is None:
            return False
        write_local_bytes(Path(path), found.data)
        return True

    def was_corrupt(self, path: Path) -> bool:
        key = self.key(path)
        with self._guard:
            return any(entry["key"] == key for entry in self.corrupt)

    def append(self, path: Path, line: str) -> None:
        """Merge one line into the stored copy of ``path`` (compare-and-swap on its etag)."""
        key = self.key(path)
        if key is None:
            return
        data = (line + "\n").encode("utf-8")
        for attempt in range(_APPEND_TRIES):
            if attempt:
                first, most = _APPEND_BACKOFF_S
                time.sleep(random.uniform(0, min(most, first * 2 ** (attempt - 1))))
            try:
                stored = self.store.get(key)
            except CorruptObject:
                stored = None  # an unreadable log is started again rather than lost for good
            if stored is None:
                if self.store.create(key, data) is not None:
                    return
                continue
            condition = stored.condition
            if condition and self.store.replace(key, stored.data + data, condition):
                return
        raise StoreError(f"{self.store.url(key)}: could not append after {_APPEND_TRIES} tries")

    def pull(self, folder: Path) -> int:
        """Fetch every object below ``folder`` that is missing locally or differs from the
        local copy (its etag, the MD5 of a single-part put, against the local bytes; a
        store whose etags are not MD5s is fetched whole). Returns how many came."""
        prefix = self.key(folder)
        if prefix is None:
            return 0
        fetched = 0
        for key, etag in list(self.store.listing(prefix)):
            local = self.root / key
            if self.key(local) is None or _same_bytes(local, etag):
                continue
            fetched += self.fetch(local)
        return fetched


def _same_bytes(local: Path, etag: str | None) -> bool:
    if not local.is_file() or not etag:
        return False
    tag = etag.strip('"').lower()
    if len(tag) != 32 or any(c not in "0123456789abcdef" for c in tag):
        return False
    return hashlib.md5(local.read_bytes(), usedforsecurity=False).hexdigest() == tag
