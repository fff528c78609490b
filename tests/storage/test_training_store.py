"""`sago train --out s3://...`: the checkpoints live on the store, and a training stopped on
one machine resumes on another that shares nothing but the store (its own scratch folder),
ending on the weights an uninterrupted training reaches (on the session's tiny model)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sago_core.storage import attached
from sago_core.storage.location import parse_store_url
from sago_core.training.config import TrainConfig
from tests.train_env import require_train, write_export


@pytest.fixture
def detached() -> Iterator[None]:
    yield
    attached.attach(None)


def _train(config: TrainConfig, stop_at: int | None = None) -> dict[str, Any]:
    from sago_core.training.data import load_examples
    from sago_core.training.model import load_base, lora_config
    from sago_core.training.trainers import train_adapters

    tokenizer, model = load_base(config.model.removeprefix("hf:"))

    def hook(step: int, steps: int, loss: float, saved: Path | None) -> None:
        if step == stop_at:
            raise KeyboardInterrupt

    trained, _ = train_adapters(
        model,
        tokenizer,
        load_examples(config),
        config,
        peft_config=lora_config(model, config),
        on_step=hook,
    )
    return {n: p.detach().clone() for n, p in trained.named_parameters() if "lora_" in n}


@pytest.mark.slow
def test_a_training_stopped_on_one_machine_resumes_on_another_from_the_store(
    bucket: str,
    tiny_model_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    detached: None,
) -> None:
    require_train()
    from sago.flows.runtime.object_store import attach_runs_store

    data = write_export(tmp_path / "export")
    settings: dict[str, Any] = {
        "model": f"hf:{tiny_model_dir}",
        "data": data,
        "steps": 4,
        "batch_size": 2,
        "learning_rate": 1e-2,
        "checkpoint_every": 2,
    }
    straight = _train(TrainConfig(out=tmp_path / "straight", **settings))

    location = parse_store_url(f"s3://{bucket}/trainings/fixed")
    store = location.parent().url

    def machine(name: str) -> TrainConfig:
        monkeypatch.setenv("SAGO_SCRATCH", str(tmp_path / name))
        attached.attach(None)
        out = location.parent().scratch() / location.name
        attach_runs_store(store, out.parent)
        return TrainConfig(out=out, store=store, **settings)

    first = machine("machine-a")
    with pytest.raises(KeyboardInterrupt):
        _train(first, stop_at=3)
    second = machine("machine-b")
    assert not second.out.exists()  # nothing of machine A's on this one
    resumed = _train(second)
    for name, value in straight.items():
        assert value.equal(resumed[name]), name
    from sago_core.storage.mirror import Mirror

    mirror = attached.current()
    assert isinstance(mirror, Mirror)
    keys = sorted(key for key, _ in mirror.store.listing("fixed/checkpoints"))
    names = {key.rsplit("/", 1)[1] for key in keys}
    assert {"adapter_model.safetensors", "optimizer.safetensors", "trainer_state.json"} <= names
    assert {key.split("/")[2] for key in keys} == {"checkpoint-2", "checkpoint-4"}
    assert not [n for n in names if n.endswith((".bin", ".pt", ".pth", ".pkl"))], names
