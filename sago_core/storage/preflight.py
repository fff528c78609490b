"""Before any model loads: can this store hold a run? (bucket, credentials, conditional
writes). Each failure names the URL and what to fix; the probe leaves no object behind."""

from __future__ import annotations

import os
import secrets
import socket

from sago_core.storage.location import StoreLocation
from sago_core.storage.objects import ObjectStore, StoreError

PROBE_TIMEOUT_S = 15.0


def check_store(location: StoreLocation, store: ObjectStore | None = None) -> None:
    store = store or ObjectStore.open(location, timeout_s=PROBE_TIMEOUT_S)
    next(iter(store.keys("")), None)  # the bucket exists and these credentials may list it
    probe = f".sago-probe/{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        if store.create(probe, b"probe") is None:
            raise StoreError(f"{location.url}: a fresh probe object already existed")
        if store.create(probe, b"probe again") is not None:
            raise StoreError(
                f"{location.url}: the store accepted a second conditional create of one key; "
                "it ignores conditional writes (If-None-Match), which claims and leases "
                "need. Use a store that honours them (S3, GCS, Azure, MinIO, recent Ceph)"
            )
    finally:
        store.delete(probe)
