"""An object store, as sago uses one: whole-object puts that carry their sha256, verified
gets, conditional create and replace, and a count of every request made.

Built on obstore (S3, GCS, Azure): credentials and endpoints come from the provider's own
environment (``AWS_ACCESS_KEY_ID``, ``AWS_ENDPOINT_URL``, ``AWS_ALLOW_HTTP``,
``GOOGLE_APPLICATION_CREDENTIALS``, ``AZURE_STORAGE_ACCOUNT_NAME``, ...), never from a sago
parameter or artifact. A put is one request that replaces the whole object, so no reader
ever sees part of one; the sha256 it carries (object metadata ``sha256``) is checked on
every get, so a truncated or corrupted object is reported, never used. Each object also
carries its ``Content-Type`` (from its name), so a report or results site published on a
bucket opens as a page in a browser rather than downloading as bytes.
"""

from __future__ import annotations

import hashlib
import mimetypes
import re
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sago_core.errors import SagoError
from sago_core.storage.location import StoreLocation

SHA256_ATTRIBUTE = "sha256"
# Types mimetypes may not know on every platform (its tables come from the OS).
CONTENT_TYPES = {
    ".parquet": "application/vnd.apache.parquet",
    ".jsonl": "application/jsonl",
    ".md": "text/markdown",
}

TEXT_TYPES = frozenset({"application/json", "application/jsonl", "image/svg+xml"})


def content_type(key: str) -> str:
    """The object's media type from its name: text types in UTF-8 (sago writes UTF-8)."""
    suffix = "." + key.rsplit(".", 1)[-1].lower() if "." in key.rsplit("/", 1)[-1] else ""
    found = CONTENT_TYPES.get(suffix) or mimetypes.guess_type("x" + suffix)[0]
    if found is None:
        return "application/octet-stream"
    text = found.startswith("text/") or found in TEXT_TYPES
    return f"{found}; charset=utf-8" if text else found


class StoreError(SagoError):
    """The object store cannot be used as asked (location, credentials, permissions)."""


class CorruptObject(StoreError):
    """An object whose bytes do not match the sha256 recorded when it was written."""

    def __init__(self, url: str, recorded: str | None, found: str) -> None:
        self.url, self.recorded, self.found = url, recorded, found
        super().__init__(
            f"{url}: content sha256 {found[:12]} does not match the recorded "
            f"{(recorded or 'none')[:12]} (truncated, corrupted or written by hand)"
        )


@dataclass(frozen=True)
class StoredObject:
    data: bytes
    sha256: str
    etag: str | None
    version: str | None = None  # GCS matches a conditional put on the generation

    @property
    def condition(self) -> dict[str, str]:
        """What a put conditional on this very version sends (e_tag and/or version)."""
        return {k: v for k, v in (("e_tag", self.etag), ("version", self.version)) if v}


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _says(text: str, *words: str) -> bool:
    """Whether an error's text names any of these words or status codes as a whole token:
    a request's timing ("in 2.403376ms") must not read as a 403."""
    return any(re.search(rf"(?<![\w.]){re.escape(w)}(?![\w.])", text) for w in words)


def _hint(location: StoreLocation, exc: BaseException) -> str:
    import obstore.exceptions as oe

    text = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
    if "builder error" in str(exc) and "http://" in str(exc):
        setting = "AWS_ALLOW_HTTP=true" if location.scheme == "s3" else "the client's allow_http"
        return (
            f"{location.url}: the endpoint is plain http and the client refuses plain http "
            f"unless told ({text}). Set {setting} in the environment, or use an https endpoint"
        )
    if isinstance(exc, oe.UnauthenticatedError | oe.PermissionDeniedError) or _says(
        text, "403", "InvalidAccessKeyId", "SignatureDoesNotMatch", "169.254.169.254"
    ):
        return (
            f"{location.url}: access refused ({text}). Set the provider's credentials in the "
            "environment (for S3: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"
        )
    if _says(text, "404", "NoSuchBucket"):
        return (
            f"{location.url}: bucket {location.bucket!r} does not exist (or is not visible with "
            "these credentials). Create it, or fix the bucket name"
        )
    return f"{location.url}: the object store failed: {text}"


def _no_conditions(location: StoreLocation, exc: BaseException) -> str:
    return (
        f"{location.url}: the store refuses conditional writes ({str(exc)[:200]}); sago needs "
        "them for claims, leases and appends (S3 If-None-Match and If-Match, GCS generation "
        "match, Azure If-None-Match and If-Match). Use a store that honours them"
    )


class ObjectStore:
    """One bucket (and prefix) of an object store; keys are relative to the prefix."""

    def __init__(self, location: StoreLocation, store: Any) -> None:
        self.location = location
        self._store = store
        self.requests: Counter[str] = Counter()
        self._count = threading.Lock()

    @classmethod
    def open(cls, location: StoreLocation, timeout_s: float | None = None) -> ObjectStore:
        from obstore.store import from_url

        # Client options are left to the environment (AWS_ALLOW_HTTP, proxies, ...): passing
        # any replaces all of them. A probe bounds its retries instead.
        kwargs: dict[str, Any] = {}
        if timeout_s is not None:
            kwargs["retry_config"] = {"max_retries": 1, "retry_timeout": _delta(timeout_s)}
        try:
            store = from_url(location.bucket_url, **kwargs)
        except Exception as exc:  # obstore raises its own error types for a bad config
            raise StoreError(_hint(location, exc)) from exc
        return cls(location, store)

    def url(self, key: str) -> str:
        return f"{self.location.bucket_url}/{self._key(key)}"

    def _key(self, key: str) -> str:
        return self.location.key(key)

    def _tick(self, operation: str) -> None:
        with self._count:
            self.requests[operation] += 1

    def get(self, key: str) -> StoredObject | None:
        """The object and its recorded sha256 verified (None: there is none)."""
        import obstore
        import obstore.exceptions as oe

        self._tick("get")
        try:
            found = obstore.get(self._store, self._key(key))
            data = bytes(found.bytes())
        except (FileNotFoundError, oe.NotFoundError):
            return None
        except Exception as exc:
            raise StoreError(_hint(self.location, exc)) from exc
        digest = sha256_bytes(data)
        recorded = (found.attributes or {}).get(SHA256_ATTRIBUTE)
        if recorded != digest:
            raise CorruptObject(self.url(key), str(recorded) if recorded else None, digest)
        return StoredObject(data, digest, found.meta.get("e_tag"), found.meta.get("version"))

    def _put(self, key: str, data: bytes, mode: Any) -> str | None:
        import obstore

        result = obstore.put(
            self._store,
            self._key(key),
            data,
            attributes={SHA256_ATTRIBUTE: sha256_bytes(data), "Content-Type": content_type(key)},
            mode=mode,
            use_multipart=False,  # one request: the object appears whole or not at all
        )
        return result.get("e_tag")

    def put(self, key: str, data: bytes) -> None:
        """Replace the whole object (one request, its sha256 carried with it)."""
        self._tick("put")
        try:
            self._put(key, data, None)
        except Exception as exc:
            raise StoreError(_hint(self.location, exc)) from exc

    def create(self, key: str, data: bytes) -> str | None:
        """Put only if no object has the key: the new object's etag (None: one exists)."""
        import obstore.exceptions as oe

        self._tick("put_if_absent")
        try:
            return self._put(key, data, "create") or ""
        except (oe.AlreadyExistsError, oe.PreconditionError):
            return None
        except (oe.NotSupportedError, NotImplementedError) as exc:
            raise StoreError(_no_conditions(self.location, exc)) from exc
        except Exception as exc:
            if _says(str(exc), "501", "NotImplemented"):
                raise StoreError(_no_conditions(self.location, exc)) from exc
            raise StoreError(_hint(self.location, exc)) from exc

    def replace(self, key: str, data: bytes, condition: dict[str, str]) -> str | None:
        """Put only if the object is still the version ``condition`` names (its e_tag and/or
        version, ``StoredObject.condition``): the new etag (None: it changed or vanished)."""
        import obstore.exceptions as oe

        self._tick("put_if_match")
        try:
            return self._put(key, data, condition) or ""
        except (oe.PreconditionError, oe.AlreadyExistsError, FileNotFoundError):
            return None
        except Exception as exc:
            raise StoreError(_hint(self.location, exc)) from exc

    def delete(self, key: str) -> None:
        import obstore

        self._tick("delete")
        try:
            obstore.delete(self._store, self._key(key))
        except FileNotFoundError:
            return
        except Exception as exc:
            raise StoreError(_hint(self.location, exc)) from exc

    def keys(self, prefix: str) -> Iterator[str]:
        """Keys below ``prefix`` (relative to the store's prefix), in store order."""
        for key, _ in self.listing(prefix):
            yield key

    def listing(self, prefix: str) -> Iterator[tuple[str, str | None]]:
        """(key, etag) below ``prefix``, in store order."""
        import obstore

        strip = len(self.location.key("")) if self.location.prefix else 0
        full = self._key(prefix.strip("/")) if prefix.strip("/") else self.location.prefix
        pages = 0
        try:
            for chunk in obstore.list(self._store, full or None):
                pages += 1
                self._tick("list")
                for item in chunk:
                    yield str(item["path"])[strip:], item.get("e_tag")
        except Exception as exc:
            raise StoreError(_hint(self.location, exc)) from exc
        if not pages:
            self._tick("list")  # an empty listing is one request too

    def request_counts(self) -> dict[str, int]:
        with self._count:
            return dict(sorted(self.requests.items()))


def _delta(seconds: float) -> Any:
    from datetime import timedelta

    return timedelta(seconds=seconds)
