"""`sago train`'s core on a random-weight 3-layer Llama (the session's tiny model): one step
of each objective moves the LoRA weights with a finite loss; a training stopped after its
step-2 checkpoint and started again ends on the weights of an uninterrupted one; the
divergences on golden distributions; the refusals (no weights, a GGUF file, unknown LoRA
modules, a bad data row, a folder that holds another training).

The export folder is written by hand in the formats `sago export --training` writes
(tests/unit/test_training_export.py checks those)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from sago_core.errors import ConfigError, InputError
from sago_core.training.config import TrainConfig
from tests.train_env import require_train, write_export


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return write_export(tmp_path / "export")


def _config(tiny: Path, data: Path, out: Path, **kw: Any) -> TrainConfig:
    settings: dict[str, Any] = {"steps": 1, "batch_size": 2, "learning_rate": 1e-2, **kw}
    return TrainConfig(model=f"hf:{tiny}", data=data, out=out, **settings)


def _train(
    tiny: Path, config: TrainConfig, hook: Any = None
) -> tuple[dict[str, Any], dict[str, Any], list[float]]:
    """Train through `sago train`'s trainer; the base weights before, the model after and
    the losses."""
    from sago_core.training.data import load_examples
    from sago_core.training.model import load_base, lora_config
    from sago_core.training.trainers import train_adapters

    tokenizer, model = load_base(str(tiny))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    trained, losses = train_adapters(
        model,
        tokenizer,
        load_examples(config),
        config,
        peft_config=lora_config(model, config),
        on_step=hook,
    )
    after = {n: p.detach().clone() for n, p in trained.named_parameters()}
    return before, after, losses


@pytest.mark.parametrize("objective", ["sft", "consistency", "dpo"])
def test_one_step_moves_the_lora_weights_with_a_finite_loss(
    tiny_model_dir: Path, data: Path, tmp_path: Path, objective: str
) -> None:
    require_train()
    config = _config(tiny_model_dir, data, tmp_path / "out", objective=objective)
    before, after, losses = _train(tiny_model_dir, config)
    assert len(losses) == 1 and math.isfinite(losses[0]) and losses[0] > 0
    adapters = {n: v for n, v in after.items() if "lora_" in n}
    # lora_B starts at zero, so a step that trained the adapters leaves it non-zero
    assert any(v.abs().sum() > 0 for n, v in adapters.items() if "lora_B" in n)
    base = {
        n.removeprefix("base_model.model.").replace(".base_layer", ""): v
        for n, v in after.items()
        if "lora_" not in n
    }
    assert set(base) == set(before)
    for name, value in before.items():
        assert value.equal(base[name]), f"a frozen base weight moved: {name}"
    saved = {p.name for p in (tmp_path / "out" / "checkpoints" / "checkpoint-1").iterdir()}
    assert {"adapter_model.safetensors", "optimizer.safetensors", "rng.safetensors"} <= saved
    pickled = [n for n in saved if n.endswith((".bin", ".pt", ".pth", ".pkl"))]
    assert not pickled, f"a checkpoint file in pickle: {pickled}"


@pytest.mark.slow
def test_a_stopped_training_resumes_to_the_uninterrupted_weights(
    tiny_model_dir: Path, data: Path, tmp_path: Path
) -> None:
    require_train()
    from sago_core.training.checkpoint import checkpoints

    def run(out: Path, stop_at: int | None = None) -> tuple[dict[str, Any], list[float]]:
        config = _config(
            tiny_model_dir, data, out, objective="consistency", steps=4, checkpoint_every=2
        )

        def hook(step: int, steps: int, loss: float, saved: Path | None) -> None:
            if step == stop_at:
                raise KeyboardInterrupt  # the kill: after step 3, its checkpoint not written

        _, after, losses = _train(tiny_model_dir, config, hook)
        return {n: v for n, v in after.items() if "lora_" in n}, losses

    straight, straight_losses = run(tmp_path / "straight")
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "stopped", stop_at=3)
    assert [s for s, _ in checkpoints(tmp_path / "stopped")] == [2]
    resumed, resumed_losses = run(tmp_path / "stopped")  # a fresh model: weights from step 2
    assert [s for s, _ in checkpoints(tmp_path / "stopped")] == [2, 4]
    assert resumed_losses == straight_losses and len(resumed_losses) == 4
    for name, value in straight.items():
        assert value.equal(resumed[name]), name


def test_a_consistency_step_on_a_cpu_recomputes_nothing_and_scores_answer_positions_only(
    tiny_model_dir: Path, data: Path, tmp_path: Path
) -> None:
    """Two forwards a step (variant, base; no activation recomputation on a CPU), and the LM
    head only where some row predicts an answer token, with the full forward's values."""
    require_train()
    import torch

    from sago_core.training.data import load_examples
    from sago_core.training.model import load_base, lora_config
    from sago_core.training.trainers import answer_log_probs, build_trainer, pair_collator, rows

    config = _config(tiny_model_dir, data, tmp_path / "out", objective="consistency", batch_size=3)
    tokenizer, model = load_base(str(tiny_model_dir))
    examples = load_examples(config)
    batch = pair_collator(0)(list(rows(examples, "consistency", tokenizer, 512)))
    positions: list[int] = []
    model.lm_head.register_forward_hook(lambda _m, i, _o: positions.append(i[0].shape[1]))
    with torch.no_grad():
        kept = answer_log_probs(model, batch)
        full = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    answer = batch["completion_mask"][:, 1:].bool()
    assert torch.allclose(kept, torch.log_softmax(full[:, :-1][answer], -1), atol=1e-6)
    assert positions[0] == int(answer.any(0).sum()) < batch["input_ids"].shape[1]
    calls: list[int] = []
    for layer in model.model.layers:  # a recomputed layer calls its MLP again
        layer.mlp.register_forward_pre_hook(lambda *_: calls.append(1))
    build_trainer(
        model, tokenizer, examples, config, peft_config=lora_config(model, config)
    ).train()
    assert len(calls) == 2 * len(model.model.layers)


def test_divergences_on_golden_distributions() -> None:
    require_train()
    import torch

    from sago_core.training.trainers import divergence

    def logs(*rows: list[float]) -> torch.Tensor:
        return torch.tensor(rows).log()

    same = logs([0.2, 0.8])
    assert divergence(same, same, "js").item() == pytest.approx(0.0, abs=1e-7)
    assert divergence(same, same, "kl").item() == pytest.approx(0.0, abs=1e-7)
    # disjoint supports: JS is ln 2 (its bound)
    apart = divergence(logs([1.0, 1e-30]), logs([1e-30, 1.0]), "js").item()
    assert apart == pytest.approx(math.log(2), rel=1e-5)
    # KL(P||Q), P = (1/2, 1/2), Q = (1/4, 3/4): 0.5 ln 2 + 0.5 ln(2/3) = 0.1438410...
    p, q = logs([0.5, 0.5]), logs([0.25, 0.75])
    assert divergence(p, q, "kl").item() == pytest.approx(0.1438410362, rel=1e-6)
    # JS of the same pair, by hand: M = (3/8, 5/8)
    js = 0.5 * (0.5 * math.log(0.5 / 0.375) + 0.5 * math.log(0.5 / 0.625)) + 0.5 * (
        0.25 * math.log(0.25 / 0.375) + 0.75 * math.log(0.75 / 0.625)
    )
    assert divergence(p, q, "js").item() == pytest.approx(js, rel=1e-6)
    # the mean over tokens
    two = divergence(torch.cat([p, same]), torch.cat([q, same]), "kl").item()
    assert two == pytest.approx(0.1438410362 / 2, rel=1e-6)


def test_models_without_trainable_weights_are_refused(tmp_path: Path) -> None:
    from sago_core.training.model import trainable_source

    with pytest.raises(ConfigError, match="an API model; sago train needs the model's weights"):
        trainable_source("litellm:openai/gpt-4o-mini")
    with pytest.raises(ConfigError, match="without weights"):
        trainable_source("mock:echo")
    gguf = tmp_path / "model.Q4_0.gguf"
    gguf.write_bytes(b"GGUF")
    with pytest.raises(ConfigError, match="GGUF file holds quantised weights"):
        trainable_source(f"hf:{gguf}")


def test_unknown_lora_modules_are_named_with_the_models_own(
    tiny_model_dir: Path, data: Path, tmp_path: Path
) -> None:
    require_train()
    from sago_core.training.model import load_base, lora_config

    config = _config(tiny_model_dir, data, tmp_path / "out", target_modules=("q_proj", "c_attn"))
    _, model = load_base(str(tiny_model_dir))
    with pytest.raises(ConfigError) as caught:
        lora_config(model, config)
    assert str(caught.value) == (
        "--target-modules: c_attn not in the model (its linear modules: down_proj, gate_proj, "
        "k_proj, lm_head, o_proj, q_proj, up_proj, v_proj)"
    )


def test_a_bad_row_is_named_by_file_row_and_field(data: Path, tmp_path: Path) -> None:
    from sago_core.training.data import load_examples

    rows = (data / "consistency.jsonl").read_text(encoding="utf-8").splitlines()
    broken = json.loads(rows[1])
    broken["base_prompt"] = "How many legs?"
    (data / "consistency.jsonl").write_text(
        "\n".join([rows[0], json.dumps(broken), rows[2]]) + "\n", encoding="utf-8"
    )
    config = TrainConfig(model="hf:x", data=data, out=tmp_path / "out", objective="consistency")
    with pytest.raises(InputError) as caught:
        load_examples(config)
    assert str(caught.value) == (
        f"file {data / 'consistency.jsonl'}, row 2, column 'base_prompt': must be a non-empty list "
        "of {role, content} messages"
    )
    missing = TrainConfig(model="hf:x", data=tmp_path, out=tmp_path / "out")
    with pytest.raises(ConfigError, match="not a `sago export training` folder"):
        load_examples(missing)


def test_an_export_written_before_the_kind_was_named_consistency_still_trains(
    data: Path, tmp_path: Path
) -> None:
    from sago_core.training.data import data_identity, load_examples

    today = TrainConfig(model="hf:x", data=data, out=tmp_path / "out", objective="consistency")
    examples, identity = load_examples(today), data_identity(today)
    (data / "consistency.jsonl").rename(data / "pairs.jsonl")  # the file's name until then
    assert load_examples(today) == examples and len(examples) == 3
    assert all(e.base_prompt for e in examples)
    assert data_identity(today) == identity  # the same bytes: a saved training resumes


def test_a_folder_holding_another_training_is_refused(data: Path, tmp_path: Path) -> None:
    from sago_core.training.result import begin

    config = TrainConfig(model="hf:x", data=data, out=tmp_path / "out")
    begin(config, base_identity="dir-sha256:a", data_identity="sha256:d", code="c1")
    # the same training: resumed (a new code version is allowed)
    begin(config, base_identity="dir-sha256:a", data_identity="sha256:d", code="c2")
    other = config.model_copy(update={"learning_rate": 1e-3})
    with pytest.raises(ConfigError, match=r"holds another training \(settings differs\)"):
        begin(other, base_identity="dir-sha256:a", data_identity="sha256:d", code="c2")
    with pytest.raises(ConfigError, match=r"\(data_identity differs\)"):
        begin(config, base_identity="dir-sha256:a", data_identity="sha256:e", code="c2")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine", encoding="utf-8")
    busy = config.model_copy(update={"out": tmp_path / "busy"})
    with pytest.raises(ConfigError, match="not empty and not a sago training folder"):
        begin(busy, base_identity="dir-sha256:a", data_identity="sha256:d", code="c1")


def test_a_tracker_that_does_not_answer_is_left_out_with_one_warning(
    data: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import socket

    from sago_core.config.tracking import TrackingSettings
    from sago_core.training.trainers import answering_trackers

    with socket.socket() as free:  # a port nothing listens on once this closes
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    tracking = TrackingSettings.model_validate(
        {
            "mlflow": {"tracking_uri": f"http://127.0.0.1:{port}", "timeout_s": 2},
            "wandb": {"project": "p", "mode": "offline"},
        }
    )
    config = TrainConfig(model="hf:x", data=data, out=tmp_path / "out", tracking=tracking)
    assert config.report_to() == ["mlflow", "wandb"]
    assert answering_trackers(config) == ["wandb"]
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 1 and f"127.0.0.1:{port}" in warned[0]
