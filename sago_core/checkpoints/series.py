"""Make a series of checkpoints of one model, each saved as a plain safetensors folder.

Two families, so the consistency study can compare sign patterns between them:

- ``finetune``: full fine-tuning of a training split's questions and reference answers
  (``sago_core.training.split``) through ``sago train``'s SFT trainer (the answer's tokens
  after the question, in the model's chat format), saving after each listed cumulative step
  count; step 0 is the starting model itself. Every checkpoint folder holds the split it
  learned from (``split.json``), so a study can prove its evaluation sets are disjoint from
  it.
- ``quantize``: round-to-nearest symmetric per-output-row quantisation of every 2-D weight to
  each listed bit width, then stored back in float32 (simulated quantisation; 32 = untouched).

Deterministic on CPU: the trainer's seeded data order and initial state. Torch is imported
inside the functions.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sago_core.backends.materialise import plain_copy
from sago_core.backends.model_source import LocalModel
from sago_core.training.split import SPLIT_FILE, TrainingSplit


def _load(source: LocalModel) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs: dict[str, Any] = {"trust_remote_code": False}
    if source.gguf_file:
        kwargs["gguf_file"] = source.gguf_file
    tokenizer = AutoTokenizer.from_pretrained(source.location, **kwargs)
    model = AutoModelForCausalLM.from_pretrained(source.location, dtype=torch.float32, **kwargs)
    if source.gguf_file:
        model = plain_copy(model)
    return tokenizer, model


NOTE_FILE = "sago_checkpoint.json"


def _save(
    model: Any,
    tokenizer: Any,
    folder: Path,
    note: dict[str, Any],
    split: TrainingSplit | None = None,
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    if split is not None:
        text = json.dumps(split.to_json(), indent=2)
        (folder / SPLIT_FILE).write_text(text, encoding="utf-8")
    # the note last: a folder with a note is a finished checkpoint
    (folder / NOTE_FILE).write_text(json.dumps(note, indent=2), encoding="utf-8")
    return folder


def read_note(folder: Path) -> dict[str, Any] | None:
    path = folder / NOTE_FILE
    if not path.is_file():
        return None
    note: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return note


def finetune_series(
    source: LocalModel,
    split: TrainingSplit,
    steps: Sequence[int],
    out_dir: Path,
    learning_rate: float = 5e-5,
    batch_size: int = 4,
    seed: int = 0,
    extra_note: dict[str, Any] | None = None,
) -> list[Path]:
    """Checkpoints after each cumulative step count in ``steps`` (sorted, 0 allowed), trained
    by ``sago train``'s SFT trainer on every weight (no adapters) at a constant rate."""
    from transformers import TrainerCallback

    from sago_core.training.config import TrainConfig
    from sago_core.training.data import Example
    from sago_core.training.trainers import build_trainer

    pairs = split.pairs()
    if not pairs:
        raise ValueError(f"training split {split.name!r} holds no question/answer pair")
    targets = sorted(set(steps))
    tokenizer, model = _load(source)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    note = {
        "family": "finetune",
        "learning_rate": learning_rate,
        "batch_size": batch_size,
        "seed": seed,
        "training_split": split.name,
        "training_digest": split.digest(),
        **(extra_note or {}),
    }
    saved: list[Path] = []

    def save(step: int, trained: Any) -> None:
        folder = out_dir / f"step-{step:04d}"
        saved.append(_save(trained, tokenizer, folder, {**note, "step": step}, split))

    class _AtTargets(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if state.global_step in targets:
                save(state.global_step, kw["model"])

    if 0 in targets:
        save(0, model)
    if targets[-1] > 0:
        config = TrainConfig(
            model=f"hf:{source.location}",
            data=out_dir,
            out=out_dir / ".training",
            objective="sft",
            steps=targets[-1],
            batch_size=batch_size,
            learning_rate=learning_rate,
            lr_schedule="constant",
            seed=seed,
        )
        examples = [Example([{"role": "user", "content": q}], a) for q, a in pairs]
        trainer = build_trainer(
            model, tokenizer, examples, config, callbacks=[_AtTargets()],
            overrides={"save_strategy": "no"},
        )  # fmt: skip
        trainer.train()
    return saved


def quantize_weights(model: Any, bits: int) -> None:
    """Symmetric round-to-nearest per output row, in place, for every 2-D weight."""
    import torch

    if bits >= 32:
        return
    levels = 2 ** (bits - 1) - 1
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if parameter.dim() != 2 or not name.endswith("weight"):
                continue
            scale = parameter.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / levels
            parameter.copy_(torch.round(parameter / scale).clamp(-levels, levels) * scale)


def quantize_series(
    source: LocalModel,
    bits: Sequence[int],
    out_dir: Path,
    extra_note: dict[str, Any] | None = None,
) -> list[Path]:
    """One checkpoint per bit width, each quantised from the same starting weights."""
    saved = []
    for width in sorted(set(bits), reverse=True):
        if width < 2:
            raise ValueError(f"bit width {width} is below 2")
        tokenizer, model = _load(source)
        quantize_weights(model, width)
        note = {"family": "quantize", "bits": width, **(extra_note or {})}
        saved.append(_save(model, tokenizer, out_dir / f"bits-{width:02d}", note))
    return saved
