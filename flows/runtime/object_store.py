"""Attach this process to the object store its runs folder lives on.

A flow (the evaluation, a shard worker, score, watch) calls ``attach_runs_store`` first;
from then on every artifact write is also a whole-object put, and every read of a file this
machine does not have fetches it. Idempotent: a worker serving many shards attaches once.
"""

from __future__ import annotations

from pathlib import Path

from sago_core.artifacts.layout import RunLayout, local_only
from sago_core.storage import attached
from sago_core.storage.location import is_url, parse_store_url
from sago_core.storage.mirror import Mirror
from sago_core.storage.objects import ObjectStore, StoreError
from sago_core.storage.preflight import check_store


def attach_runs_store(runs_store: str | None, runs_dir: Path) -> Mirror | None:
    """The mirror of ``runs_store`` in ``runs_dir`` (this machine's scratch), attached."""
    if runs_store is None:
        return None
    current = attached.current()
    location = parse_store_url(runs_store)
    if isinstance(current, Mirror) and current.store.location == location:
        return current
    check_store(location)  # once per process and store: bucket, credentials, conditions
    mirror = runs_mirror(ObjectStore.open(location), Path(runs_dir))
    mirror.root.mkdir(parents=True, exist_ok=True)
    attached.attach(mirror)
    return mirror


def runs_mirror(store: ObjectStore, runs_dir: Path) -> Mirror:
    """A runs folder mirrored to ``store``; what stays local is the run layout's word."""
    folders, names = local_only(Path(runs_dir))
    return Mirror(store, Path(runs_dir), local_folders=folders, local_names=names)


def attached_mirror(run_dir: Path) -> Mirror | None:
    """The attached store's mirror if ``run_dir`` is inside it (a local run started later in
    the same process is not on the store)."""
    current = attached.current()
    if isinstance(current, Mirror) and run_dir.resolve().is_relative_to(current.root):
        return current
    return None


def runs_folder(text: str) -> Path:
    """A runs folder named by a path or a store URL; a URL's store is attached and its local
    scratch mirror returned."""
    if not is_url(text):
        return Path(text)
    location = parse_store_url(text)
    mirror = attach_runs_store(location.url, location.scratch())
    assert mirror is not None
    return mirror.root


def fetch_run_folder(text: str) -> Path:
    """A run folder named by a local path or by its URL on a store; a URL's folder is pulled
    into this machine's scratch (verified) and the store stays attached for what follows."""
    if not is_url(text):
        return Path(text)
    location = parse_store_url(text, field="run folder")
    runs = location.parent()
    mirror = attach_runs_store(runs.url, runs.scratch())
    assert mirror is not None
    local = RunLayout.of(mirror.root, location.name).run_dir
    if mirror.pull(local) == 0 and not local.is_dir():
        raise StoreError(f"{text}: the store holds no run there (no objects below it)")
    return local
