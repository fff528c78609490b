"""Make a series of checkpoints of one model, each saved as a plain safetensors folder.

Two families, so the consistency study can compare sign patterns between them:

- ``finetune``: full fine-tuning with AdamW on question/answer text of a training split
  (``sago_core.checkpoints.training_split``; the reference answers in the model's chat
  format), saving after each listed cumulative step count; step 0 is the starting model
  itself. Every checkpoint folder holds the split it learned from (``training_split.json``),
  so a study can prove its evaluation sets are disjoint from it.
- ``quantize``: round-to-nearest symmetric per-output-row quantisation of every 2-D weight to
  each listed bit width, then stored back in float32 (simulated quantisation; 32 = untouched).

Deterministic: seeded torch, a fixed data order, CPU. Torch is imported inside the functions.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sago_core.backends.materialise import plain_copy
from sago_core.backends.model_source import LocalModel
from sago_core.checkpoints.training_split import SPLIT_FILE, TrainingSplit


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


def training_texts(tokenizer: Any, pairs: Sequence[tuple[str, str]]) -> list[str]:
    """Question/answer pairs in the model's chat format (plain text without a template)."""
    texts = []
    for question, answer in pairs:
        if tokenizer.chat_template:
            messages = [
                {"role": "user", "content": question},
                {"role": "assistant", "content": answer},
            ]
            texts.append(tokenizer.apply_chat_template(messages, tokenize=False))
        else:
            texts.append(f"{question}\n{answer}")
    return texts


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
    """Checkpoints after each cumulative step count in ``steps`` (sorted, 0 allowed)."""
    import torch

    pairs = split.pairs()
    if not pairs:
        raise ValueError(f"training split {split.name!r} holds no question/answer pair")
    torch.manual_seed(seed)
    tokenizer, model = _load(source)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    texts = training_texts(tokenizer, pairs)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    saved, done = [], 0
    for target in sorted(set(steps)):
        model.train()
        while done < target:
            start = (done * batch_size) % len(texts)
            batch = [texts[(start + i) % len(texts)] for i in range(batch_size)]
            encoded = tokenizer(batch, return_tensors="pt", padding=True, add_special_tokens=False)
            labels = encoded["input_ids"].masked_fill(encoded["attention_mask"] == 0, -100)
            loss = model(**encoded, labels=labels).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            done += 1
        model.eval()
        note = {
            "family": "finetune",
            "step": target,
            "learning_rate": learning_rate,
            "batch_size": batch_size,
            "seed": seed,
            "training_split": split.name,
            "training_digest": split.digest(),
            **(extra_note or {}),
        }
        saved.append(_save(model, tokenizer, out_dir / f"step-{target:04d}", note, split))
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
