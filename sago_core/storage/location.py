"""Where a runs folder lives when it is a URL: the store, its prefix and the local scratch.

``runs_dir`` is a local path (as ever) or a URL of an object store. A URL's runs live on the
store; each machine works in a scratch folder of its own that mirrors them (``SAGO_SCRATCH``,
or ``stores`` in the user's cache folder), so two workers on two machines share no directory.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from sago_core.errors import ConfigError

# scheme -> what it is (obstore serves every one of them through ``from_url``)
SCHEMES = {
    "s3": "Amazon S3 or an S3-compatible store (MinIO, Ceph, R2, moto)",
    "s3a": "Amazon S3 (Hadoop spelling)",
    "gs": "Google Cloud Storage",
    "az": "Azure Blob Storage",
    "abfs": "Azure Data Lake / Blob Storage",
    "abfss": "Azure Data Lake / Blob Storage over TLS",
    "azure": "Azure Blob Storage",
}
SCRATCH_ENV = "SAGO_SCRATCH"
CACHE_ENV = "SAGO_CACHE_DIR"
_URL = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<rest>.*)$")


def user_cache() -> Path:
    """This user's cache folder on this machine (``SAGO_CACHE_DIR``, or ``~/.cache/sago``):
    what sago keeps there only saves time or mirrors a store, so it is safe to delete."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "sago")


def is_url(text: str | os.PathLike[str]) -> bool:
    return bool(_URL.match(str(text)))


@dataclass(frozen=True)
class StoreLocation:
    """``<scheme>://<bucket>/<prefix>``: runs live under ``prefix`` in ``bucket``."""

    scheme: str
    bucket: str
    prefix: str

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.bucket}" + (f"/{self.prefix}" if self.prefix else "")

    @property
    def bucket_url(self) -> str:
        return f"{self.scheme}://{self.bucket}"

    def key(self, relative: str) -> str:
        """The object key of a path relative to the runs folder."""
        return f"{self.prefix}/{relative}" if self.prefix else relative

    def scratch(self) -> Path:
        """This machine's local mirror of the store's runs folder."""
        base = os.environ.get(SCRATCH_ENV) or user_cache() / "stores"
        readable = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{self.bucket}_{self.prefix}").strip("_")
        digest = hashlib.sha256(self.url.encode()).hexdigest()[:10]
        return (Path(base) / f"{readable[:60]}-{digest}").resolve()

    def parent(self) -> StoreLocation:
        head, _, _ = self.prefix.rpartition("/")
        return StoreLocation(self.scheme, self.bucket, head)

    @property
    def name(self) -> str:
        return self.prefix.rpartition("/")[2]


def parse_store_url(url: str, field: str = "runs_dir") -> StoreLocation:
    """A store URL, checked: a known scheme, a bucket, no empty path segments."""
    found = _URL.match(url.strip())
    if not found:
        raise ConfigError(f"{field} {url!r} is not a URL (expected <scheme>://<bucket>/<prefix>)")
    scheme = found["scheme"].lower()
    if scheme not in SCHEMES:
        known = ", ".join(f"{k}:// ({v})" for k, v in SCHEMES.items())
        raise ConfigError(
            f"{field} {url!r}: unknown scheme {scheme!r}. Use a local path, or one of: {known}"
        )
    bucket, _, prefix = found["rest"].partition("/")
    prefix = prefix.strip("/")
    if not bucket:
        raise ConfigError(f"{field} {url!r} names no bucket ({scheme}://<bucket>/<prefix>)")
    if any(part in ("", ".", "..") for part in prefix.split("/")) and prefix:
        raise ConfigError(f"{field} {url!r}: empty, '.' or '..' path segments are not allowed")
    return StoreLocation(scheme, bucket, prefix)
