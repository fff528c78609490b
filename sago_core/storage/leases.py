"""Leases on an object store: a claim that one holder wins and that expires with its holder.

On one machine a lock is an ``flock`` the kernel drops when its process dies. Machines that
share only a store use a lease object instead: created with a conditional put (S3
``If-None-Match: *``), so exactly one holder wins; renewed by its holder with a put
conditional on the version it wrote (``If-Match``); and, once its expiry has passed without
a renewal (its holder died), taken over by a conditional put on the version found, so again
exactly one taker wins. Expiry is wall-clock time: machines' clocks must agree to well
within the lease's time to live (``DEFAULT_TTL_S``, minutes against NTP's milliseconds).
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass

from sago_core.storage.objects import CorruptObject, ObjectStore

DEFAULT_TTL_S = 120.0


@dataclass
class Lease:
    key: str
    holder: str
    condition: dict[str, str]  # the version this holder wrote (``StoredObject.condition``)
    expires_at: float


def _body(holder: str, ttl_s: float) -> tuple[bytes, float]:
    expires = time.time() + ttl_s
    record = {"holder": holder, "host": socket.gethostname(), "pid": os.getpid()}
    return json.dumps({**record, "expires_at": expires}, sort_keys=True).encode(), expires


def holder_of(store: ObjectStore, key: str) -> tuple[str, float, dict[str, str]] | None:
    """(holder, expires_at, version condition) of the lease at ``key``; None: no lease."""
    try:
        found = store.get(key)
    except CorruptObject:
        return ("", 0.0, {})  # unreadable: treated as expired
    if found is None:
        return None
    try:
        record = json.loads(found.data)
        return str(record["holder"]), float(record["expires_at"]), found.condition
    except (ValueError, KeyError, TypeError):
        return ("", 0.0, found.condition)


def try_acquire(store: ObjectStore, key: str, holder: str, ttl_s: float) -> Lease | None:
    """The lease, if this call wins it (or ``holder`` holds it already); None otherwise."""
    for _ in range(3):
        body, expires = _body(holder, ttl_s)
        etag = store.create(key, body)
        if etag is not None:
            return Lease(key, holder, _written(store, key, etag), expires)
        found = holder_of(store, key)
        if found is None:
            continue  # released meanwhile: try to create it again
        owner, expires_at, current = found
        if owner != holder and expires_at > time.time():
            return None
        if not current:  # unreadable and no version to swap on: remove, then retry
            store.delete(key)
            continue
        etag = store.replace(key, body, current)
        return Lease(key, holder, _written(store, key, etag), expires) if etag is not None else None
    return None


def renew(store: ObjectStore, lease: Lease, ttl_s: float) -> bool:
    """Extend a held lease (False: it was lost, taken over after it expired)."""
    body, expires = _body(lease.holder, ttl_s)
    etag = store.replace(lease.key, body, lease.condition)
    if etag is None:
        return False
    lease.condition, lease.expires_at = _written(store, lease.key, etag), expires
    return True


def _written(store: ObjectStore, key: str, etag: str) -> dict[str, str]:
    """The version condition of what this holder just wrote (a store that reports no etag
    on a put, or versions by generation, is read back once)."""
    if etag:
        return {"e_tag": etag}
    found = holder_of(store, key)
    return found[2] if found else {}


def is_held(store: ObjectStore, key: str) -> bool:
    found = holder_of(store, key)
    return found is not None and found[1] > time.time()


def release(store: ObjectStore, lease: Lease) -> None:
    """Give a lease up, unless another holder has taken it over meanwhile."""
    found = holder_of(store, lease.key)
    if found is not None and found[0] == lease.holder:
        store.delete(lease.key)
