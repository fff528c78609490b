"""The object store under sago's runs, against a real S3-compatible server on 127.0.0.1:
verified gets, exclusive creates, compare-and-swap, leases, the mirror, the preflight."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from sago_core.errors import ConfigError
from sago_core.storage.leases import release, renew, try_acquire
from sago_core.storage.location import parse_store_url
from sago_core.storage.mirror import Mirror
from sago_core.storage.objects import CorruptObject, ObjectStore, StoreError
from sago_core.storage.preflight import check_store
from tests.storage.s3_server import s3_client, s3_server, store_environment


def _store(bucket: str, prefix: str = "runs") -> ObjectStore:
    return ObjectStore.open(parse_store_url(f"s3://{bucket}/{prefix}"))


def test_urls_are_checked_and_name_what_to_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match=r"'ftp://b/runs'.*unknown scheme 'ftp'.*s3://"):
        parse_store_url("ftp://b/runs")
    with pytest.raises(ConfigError, match="names no bucket"):
        parse_store_url("s3:///runs")
    with pytest.raises(ConfigError, match=r"'\.\.' path segments"):
        parse_store_url("s3://b/runs/../x")
    location = parse_store_url("s3://b/team/runs/")
    assert (location.bucket, location.prefix, location.url) == (
        "b",
        "team/runs",
        "s3://b/team/runs",
    )
    monkeypatch.setenv("SAGO_SCRATCH", "/tmp/sago-scratch-test")
    one, two = location.scratch(), parse_store_url("s3://b/other").scratch()
    assert one.parent == Path("/tmp/sago-scratch-test") and one != two


def test_objects_carry_their_sha256_and_a_changed_one_is_refused(
    bucket: str, s3_endpoint: str
) -> None:
    store = _store(bucket)
    store.put("run/a.parquet", b"the bytes")
    found = store.get("run/a.parquet")
    assert found is not None and found.data == b"the bytes"
    assert store.get("run/missing") is None
    client = s3_client(s3_endpoint)
    # truncated in place, its metadata kept (a disk fault on the server, a partial copy)
    head = client.head_object(Bucket=bucket, Key="runs/run/a.parquet")
    client.put_object(
        Bucket=bucket, Key="runs/run/a.parquet", Body=b"the by", Metadata=head["Metadata"]
    )
    with pytest.raises(CorruptObject, match="does not match the recorded"):
        store.get("run/a.parquet")
    # replaced by hand, without any metadata
    client.put_object(Bucket=bucket, Key="runs/run/a.parquet", Body=b"edited")
    with pytest.raises(CorruptObject, match="recorded none"):
        store.get("run/a.parquet")
    assert store.request_counts()["get"] == 4


def test_objects_carry_a_content_type_so_a_published_page_opens_in_a_browser(
    bucket: str, s3_endpoint: str
) -> None:
    store = _store(bucket)
    for key in ("site/index.html", "run/summary.parquet", "run/manifest.json", "run/blob"):
        store.put(key, b"x")
    client = s3_client(s3_endpoint)
    found = {
        key: client.head_object(Bucket=bucket, Key=f"runs/{key}")["ContentType"]
        for key in ("site/index.html", "run/summary.parquet", "run/manifest.json", "run/blob")
    }
    assert found == {
        "site/index.html": "text/html; charset=utf-8",
        "run/summary.parquet": "application/vnd.apache.parquet",
        "run/manifest.json": "application/json; charset=utf-8",
        "run/blob": "application/octet-stream",
    }


def test_exactly_one_concurrent_create_wins_and_stale_swaps_lose(bucket: str) -> None:
    store = _store(bucket)
    wins: list[int] = []
    threads = [
        threading.Thread(
            target=lambda i=i: store.create("claim", str(i).encode()) and wins.append(i)
        )
        for i in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(wins) == 1
    found = store.get("claim")
    assert found is not None and found.data == str(wins[0]).encode() and found.etag
    assert store.replace("claim", b"next", found.condition)
    assert store.replace("claim", b"late", found.condition) is None  # its version is gone
    got = store.get("claim")
    assert got is not None and got.data == b"next"


def test_a_lease_has_one_holder_and_expires_with_a_dead_one(bucket: str) -> None:
    store = _store(bucket)
    first = try_acquire(store, "leases/shard", "worker-1", ttl_s=1.0)
    assert first is not None
    assert try_acquire(store, "leases/shard", "worker-2", ttl_s=1.0) is None
    assert renew(store, first, ttl_s=1.0)
    time.sleep(1.3)  # worker-1 died: no more renewals
    taken = try_acquire(store, "leases/shard", "worker-2", ttl_s=30.0)
    assert taken is not None and taken.holder == "worker-2"
    assert not renew(store, first, ttl_s=1.0)  # the dead holder cannot get it back
    release(store, first)  # nor remove it
    assert try_acquire(store, "leases/shard", "worker-3", ttl_s=30.0) is None
    release(store, taken)
    assert try_acquire(store, "leases/shard", "worker-3", ttl_s=30.0) is not None


def test_two_machines_share_files_and_lose_no_appended_line(bucket: str, tmp_path: Path) -> None:
    from sago.flows.runtime.object_store import runs_mirror

    a = runs_mirror(_store(bucket), tmp_path / "machine-a")
    b = runs_mirror(_store(bucket), tmp_path / "machine-b")
    a.push(a.root / "run-1" / "prompts.parquet", b"prompts")
    assert b.fetch(b.root / "run-1" / "prompts.parquet")
    assert (b.root / "run-1" / "prompts.parquet").read_bytes() == b"prompts"
    assert not b.fetch(b.root / "run-1" / "absent.parquet")
    # never mirrored: Prefect's home, materialised weights, lock files
    for local in (".prefect/prefect.db", ".cache/materialised/w/model.safetensors"):
        assert a.key(a.root / local) is None
    assert a.key(a.root / "run-1" / ".prefect-results" / ".locks" / "k.lock") is None
    assert a.key(a.root / "run-1" / ".leases" / "k") is None
    record = a.root / "run-1" / ".prefect-results" / "r.json"
    assert a.key(record) == "run-1/.prefect-results/r.json"
    lines = [f"line {i}" for i in range(12)]
    threads = [
        threading.Thread(
            target=(a if i % 2 else b).append,
            args=((a if i % 2 else b).root / "run-1" / "ledger.jsonl", line),
        )
        for i, line in enumerate(lines)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stored = a.store.get("run-1/ledger.jsonl")
    assert stored is not None
    assert sorted(stored.data.decode().splitlines()) == sorted(lines)


def test_a_corrupt_object_is_counted_and_not_used(
    bucket: str, s3_endpoint: str, tmp_path: Path
) -> None:
    a = Mirror(_store(bucket), tmp_path / "a", local_folders=(), local_names=())
    b = Mirror(_store(bucket), tmp_path / "b", local_folders=(), local_names=())
    a.push(a.root / "run" / "scores.parquet", b"x" * 100)
    s3_client(s3_endpoint).put_object(Bucket=bucket, Key="runs/run/scores.parquet", Body=b"x" * 50)
    target = b.root / "run" / "scores.parquet"
    assert not b.fetch(target)
    assert not target.exists() and b.was_corrupt(target)
    assert b.corrupt[0]["key"] == "run/scores.parquet"


def test_the_preflight_names_the_url_and_leaves_nothing_behind(
    bucket: str, s3_endpoint: str
) -> None:
    location = parse_store_url(f"s3://{bucket}/runs")
    check_store(location)
    assert s3_client(s3_endpoint).list_objects_v2(Bucket=bucket).get("KeyCount") == 0
    with pytest.raises(StoreError, match=r"s3://no-such-bucket/runs: bucket 'no-such-bucket'"):
        check_store(parse_store_url("s3://no-such-bucket/runs"))

    class IgnoresConditions(ObjectStore):
        def create(self, key: str, data: bytes) -> str | None:
            self.put(key, data)
            return "etag"

    ignoring = IgnoresConditions(location, ObjectStore.open(location)._store)
    with pytest.raises(StoreError, match="ignores conditional writes"):
        check_store(location, ignoring)
    assert s3_client(s3_endpoint).list_objects_v2(Bucket=bucket).get("KeyCount") == 0


def test_wrong_credentials_are_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with s3_server(tmp_path / "moto.log", require_auth=True) as endpoint:
        for name, value in store_environment(endpoint).items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "not-a-key")
        with pytest.raises(
            StoreError, match=r"s3://bucket/runs: access refused.*AWS_ACCESS_KEY_ID"
        ):
            check_store(parse_store_url("s3://bucket/runs"))


def test_a_withdrawn_file_leaves_the_store_and_a_changed_one_is_fetched_again(
    bucket: str, tmp_path: Path
) -> None:
    from sago_core.artifacts.store import atomic_write_bytes
    from sago_core.storage import attached

    a = Mirror(_store(bucket), tmp_path / "a", local_folders=(), local_names=())
    b = Mirror(_store(bucket), tmp_path / "b", local_folders=(), local_names=())
    record = a.root / "run" / ".prefect-results" / "generate-key"
    try:
        attached.attach(a)
        atomic_write_bytes(record, b"a result that must not be committed")
        assert a.store.get("run/.prefect-results/generate-key") is not None
        attached.remove(record)  # the stage runner withdrawing a shard with failures
        assert not record.exists()
        assert a.store.get("run/.prefect-results/generate-key") is None
        # a file another machine changed at a fixed path: refresh and pull see the change
        atomic_write_bytes(a.root / "run" / "shard.parquet", b"version 1")
        assert b.fetch(b.root / "run" / "shard.parquet")
        atomic_write_bytes(a.root / "run" / "shard.parquet", b"version 2")
        assert b.pull(b.root / "run") == 1  # the etag differs from the local bytes' MD5
        assert (b.root / "run" / "shard.parquet").read_bytes() == b"version 2"
        assert b.pull(b.root / "run") == 0  # nothing changed: nothing fetched
        atomic_write_bytes(a.root / "run" / "shard.parquet", b"version 3")
        assert b.fetch(b.root / "run" / "shard.parquet")  # what attached.refresh calls
        assert (b.root / "run" / "shard.parquet").read_bytes() == b"version 3"
    finally:
        attached.attach(None)


def test_a_store_that_ignores_if_match_is_refused(bucket: str) -> None:
    location = parse_store_url(f"s3://{bucket}/runs")

    class IgnoresIfMatch(ObjectStore):
        def replace(self, key: str, data: bytes, condition: dict[str, str]) -> str | None:
            self.put(key, data)
            return "etag"

    store = IgnoresIfMatch(location, ObjectStore.open(location)._store)
    with pytest.raises(StoreError, match=r"ignores conditional writes \(If-Match\)"):
        check_store(location, store)


def test_lease_renewal_outlives_a_store_error(bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import sago.flows.runtime.lease_locks as lease_locks

    manager = lease_locks.LeaseLockManager(_store(bucket), "run/.leases", ttl_s=0.4)
    calls: list[int] = []
    real = lease_locks.renew

    def flaky(store: ObjectStore, lease: object, ttl_s: float) -> bool:
        calls.append(1)
        if len(calls) == 1:
            raise StoreError("s3://b: the object store failed: 503 Slow Down")
        return real(store, lease, ttl_s)  # type: ignore[arg-type]

    monkeypatch.setattr(lease_locks, "renew", flaky)
    assert manager.acquire_lock("k", "holder-1")
    time.sleep(1.0)  # several renewal rounds, the first of which failed
    assert len(calls) >= 3
    assert manager.is_locked("k") and not manager.acquire_lock("k", "holder-2", 0.3)
    manager.release_lock("k", "holder-1")
    assert manager.acquire_lock("k", "holder-2", 1.0)
    manager.release_lock("k", "holder-2")
    manager.close()
