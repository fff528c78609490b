"""Where the results site can be opened: its local index, and when it was written into a
runs folder on an object store, the object's URL and, where the provider's convention
allows, its web address (what the watch's Prefect artifact links to instead of a file://
path that works only on the machine that wrote it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from sago_core.storage import attached
from sago_core.storage.location import StoreLocation
from sago_core.storage.mirror import Mirror


@dataclass(frozen=True)
class SiteAddress:
    local: Path
    store_url: str | None = None  # s3://bucket/prefix/site/index.html
    web: str | None = None  # http(s) address of that object

    @property
    def best(self) -> str:
        """What to open: the web address, else the store URL, else the local file."""
        return self.web or self.store_url or self.local.resolve().as_uri()


def web_address(location: StoreLocation, key: str, env: dict[str, str]) -> str | None:
    """The http(s) address of object ``key`` (relative to the runs prefix); None where the
    provider's environment does not say it (an Azure store without an account name)."""
    path = quote(location.key(key))
    bucket = location.bucket
    if location.scheme in ("s3", "s3a"):
        endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
        if endpoint:
            return f"{endpoint.rstrip('/')}/{bucket}/{path}"  # path-style, as MinIO serves
        region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
        host = f"{bucket}.s3.{region}.amazonaws.com" if region else f"{bucket}.s3.amazonaws.com"
        return f"https://{host}/{path}"
    if location.scheme == "gs":
        return f"https://storage.googleapis.com/{bucket}/{path}"
    account = env.get("AZURE_STORAGE_ACCOUNT_NAME")
    if location.scheme in ("az", "azure") and account:
        return f"https://{account}.blob.core.windows.net/{bucket}/{path}"
    return None


def site_address(index: Path, env: dict[str, str] | None = None) -> SiteAddress:
    mirror = attached.current()
    key = mirror.key(index) if isinstance(mirror, Mirror) else None
    if mirror is None or not isinstance(mirror, Mirror) or key is None:
        return SiteAddress(index)
    location = mirror.store.location
    values = dict(os.environ) if env is None else env
    return SiteAddress(index, mirror.store.url(key), web_address(location, key, values))
