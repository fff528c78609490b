"""Which devices a run spreads its shards over."""

from __future__ import annotations


def test_devices_come_from_the_visible_gpus(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from flows.devices import device_ids

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert device_ids(2) == ["2", "3"] and device_ids("auto") == ["2", "3"]
    assert device_ids(1) == ["2"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert device_ids("auto") == ["cpu"] and device_ids(2) == ["0", "1"]
