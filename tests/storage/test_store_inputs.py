"""Bad store input stops a run before any model loads, naming the URL and what to fix; the
watch registry's claims on a store are leases that one machine wins."""

from __future__ import annotations

from pathlib import Path

import pytest

from sago_cli.main import main
from sago_core.storage import attached
from sago_core.storage.location import parse_store_url
from sago_core.storage.mirror import Mirror
from sago_core.storage.objects import ObjectStore
from sago_core.watch.registry import Registry
from tests.storage.s3_server import s3_client


def _run(capsys: pytest.CaptureFixture[str], runs_dir: str) -> tuple[int, str]:
    code = main(["run", "--preset", "demo", "--runs-dir", runs_dir, "--n", "1"])
    return code, capsys.readouterr().err


def test_an_unknown_scheme_is_refused_naming_the_url(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run(capsys, "ftp://bucket/runs")
    assert code == 2
    assert "runs_dir 'ftp://bucket/runs': unknown scheme 'ftp'" in err and "s3://" in err


def test_a_missing_bucket_is_refused_before_any_model_loads(
    s3_env: dict[str, str],
    s3_endpoint: str,
    bucket: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    import sago_core.backends.hf as hf
    import sago_core.backends.hf_loading as hf_loading

    def no_load(*args: object, **kwargs: object) -> None:
        raise AssertionError("a model was loaded before the store was checked")

    monkeypatch.setattr(hf, "load_pretrained", no_load)
    monkeypatch.setattr(hf_loading, "load_pretrained", no_load)
    monkeypatch.setenv("SAGO_SCRATCH", str(tmp_path))
    code, err = _run(capsys, "s3://no-such-bucket/runs")
    assert code == 2
    assert "s3://no-such-bucket/runs: bucket 'no-such-bucket' does not exist" in err
    assert not list(tmp_path.iterdir())  # no scratch folder, nothing written
    # a usable bucket passes the same check and keeps no probe object
    from sago_core.storage.preflight import check_store

    check_store(parse_store_url(f"s3://{bucket}/runs"))
    assert s3_client(s3_endpoint).list_objects_v2(Bucket=bucket).get("KeyCount") == 0


def test_one_machine_wins_a_watched_model_and_the_other_sees_it_done(
    s3_env: dict[str, str], bucket: str, tmp_path: Path
) -> None:
    location = parse_store_url(f"s3://{bucket}/runs")
    machines = [
        Mirror(ObjectStore.open(location), tmp_path / m, local_folders=(), local_names=())
        for m in ("a", "b")
    ]
    try:
        attached.attach(machines[0])
        first = Registry(machines[0].root)
        assert first.claim("hf:m", "sha256:1")
        attached.attach(machines[1])
        second = Registry(machines[1].root)
        assert not second.claim("hf:m", "sha256:1")  # machine a holds the lease
        assert not second.done("hf:m", "sha256:1")
        attached.attach(machines[0])
        first.record("hf:m", "sha256:1", machines[0].root / "demo-1")
        attached.attach(machines[1])
        assert second.done("hf:m", "sha256:1")  # fetched from the store
        (entry,) = second.entries()
        assert entry.run_dir == str(machines[1].root / "demo-1")  # as machine b has it
        assert second.claim("hf:m", "sha256:1") is False  # released, but already done
    finally:
        attached.attach(None)
