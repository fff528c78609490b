"""Before any model loads: can this store hold a run? (bucket, credentials, conditional
writes). Each failure names the URL and what to fix; the probe leaves no object behind."""

from __future__ import annotations

import os
import secrets
import socket

from sago_core.storage.location import StoreLocation
from sago_core.storage.objects import ObjectStore, StoreError

PROBE_TIMEOUT_S = 15.0


_checked: set[StoreLocation] = set()


def check_store(location: StoreLocation, store: ObjectStore | None = None) -> None:
    """Raises ``StoreError`` naming the URL and what to fix; a store that passed once in
    this process is not probed again."""
    if location in _checked and store is None:
        return
    store = store or ObjectStore.open(location, timeout_s=PROBE_TIMEOUT_S)
    next(iter(store.keys("")), None)  # the bucket exists and these credentials may list it
    probe = f".sago-probe/{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        if store.create(probe, b"probe") is None:
            raise StoreError(f"{location.url}: a fresh probe object already existed")
        if store.create(probe, b"probe again") is not None:
            raise StoreError(_ignored(location, "a second conditional create", "If-None-Match"))
        if store.replace(probe, b"stale", {"e_tag": '"0123456789abcdef0123456789abcdef"'}):
            raise StoreError(_ignored(location, "a put on a version it lacks", "If-Match"))
    finally:
        store.delete(probe)
    _checked.add(location)


def _ignored(location: StoreLocation, what: str, header: str) -> str:
    return (
        f"{location.url}: the store accepted {what} of one key; it ignores conditional "
        f"writes ({header}), which claims, leases and appends need. Use a store that "
        "honours them (S3, GCS, Azure, MinIO, recent Ceph)"
    )
