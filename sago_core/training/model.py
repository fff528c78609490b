"""The model ``sago train`` fine-tunes: its weights found (refused before anything loads when
there are none to train), loaded in float32, its LoRA settings, and the consistency examples
turned into token ids with its chat template.

Only ``hf:`` models with float weights are trained: an API model has no weights here, and a
GGUF file holds quantised ones that LoRA cannot train. The embedded model is the exception
that makes the tutorial run offline: its GGUF is dequantised once into a plain safetensors
folder (``materialise.py``, the same folder vLLM uses), which is what gets trained.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sago_core.backends.materialise import materialised_folder
from sago_core.backends.model_source import (
    EMBEDDED_ALIASES,
    LocalModel,
    parse_model_spec,
    resolve_local_model,
)
from sago_core.errors import ConfigError
from sago_core.registry.backends import backend_spec
from sago_core.training.config import TrainConfig
from sago_core.training.data import Example, Messages


def trainable_source(spec_text: str) -> LocalModel:
    """The local weights of ``spec_text``; one line saying why when there are none."""
    spec = parse_model_spec(spec_text)
    declared = backend_spec(spec.backend)
    if declared.weights != "local":
        kind = "an API model" if declared.weights == "endpoint" else "a model without weights"
        raise ConfigError(
            f"--model {spec_text}: {kind}; sago train needs the model's weights (an hf: folder, "
            "hub id or the embedded model)"
        )
    if spec.backend != "hf":
        raise ConfigError(f"--model {spec_text}: train the same weights as hf:{spec.model_id}")
    source = resolve_local_model(spec.model_id)
    if source.kind == "gguf" and spec.model_id not in EMBEDDED_ALIASES:
        raise ConfigError(
            f"--model {spec_text}: a GGUF file holds quantised weights that LoRA cannot train; "
            "give a folder of float weights (safetensors) or a hub id"
        )
    return source


def base_folder(source: LocalModel, cache_root: Path) -> str:
    """What ``from_pretrained`` loads: the folder (the embedded GGUF materialised), or the
    hub id."""
    if source.kind == "gguf":
        return str(materialised_folder(source, cache_root))
    return source.location


def load_base(where: str) -> tuple[Any, Any]:
    """Tokenizer and float32 model, in eval mode (no dropout outside LoRA's own)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(where)
    model = AutoModelForCausalLM.from_pretrained(where, dtype=torch.float32)
    model.eval()
    return tokenizer, model


def linear_module_names(model: Any) -> list[str]:
    """The last name of every linear layer (what LoRA's ``target_modules`` matches)."""
    import torch

    return sorted(
        {
            name.rsplit(".", 1)[-1]
            for name, m in model.named_modules()
            if isinstance(m, torch.nn.Linear)
        }
    )


def lora_config(model: Any, config: TrainConfig) -> Any:
    """peft's LoRA settings for ``config.target_modules``, refused when ``model`` has no such
    linear module (the trainer adds the adapters)."""
    from peft import LoraConfig

    names = linear_module_names(model)
    missing = [m for m in config.target_modules if m not in names]
    if missing:
        raise ConfigError(
            f"--target-modules: {', '.join(missing)} not in the model (its linear modules: "
            f"{', '.join(names)})"
        )
    return LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=list(config.target_modules),
        task_type="CAUSAL_LM",
    )


@dataclass(frozen=True)
class Encoded:
    """Token ids of one example: the prompt(s) and the answer(s) that follow them."""

    prompt: list[int]
    answer: list[int]
    base_prompt: list[int] | None = None
    rejected: list[int] | None = None


def _prompt_ids(tokenizer: Any, messages: Messages) -> list[int]:
    if tokenizer.chat_template:
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    else:
        text = "\n".join(m["content"] for m in messages) + "\n"
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def _answer_ids(tokenizer: Any, messages: Messages, answer: str) -> list[int]:
    """The answer's tokens as the chat template closes an assistant turn (the end-of-turn
    token included), taken as what the full conversation adds after the prompt."""
    prompt = _prompt_ids(tokenizer, messages)
    if tokenizer.chat_template:
        full_text = tokenizer.apply_chat_template(
            [*messages, {"role": "assistant", "content": answer}], tokenize=False
        )
        full = list(tokenizer(full_text, add_special_tokens=False)["input_ids"])
        if full[: len(prompt)] == prompt and len(full) > len(prompt):
            return full[len(prompt) :]
    ids = list(tokenizer(answer, add_special_tokens=False)["input_ids"])
    return [*ids, tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else ids


def _fit(prompt: list[int], answer: list[int], limit: int) -> tuple[list[int], list[int]]:
    """Cut the prompt from the left, then the answer from the right, to ``limit`` tokens."""
    answer = answer[: max(1, limit // 2)] if len(prompt) + len(answer) > limit else answer
    return prompt[max(0, len(prompt) + len(answer) - limit) :], answer


def encode(tokenizer: Any, example: Example, max_length: int) -> Encoded:
    """The example's ids; the base prompt is followed by the very same answer tokens."""
    prompt, answer = _fit(
        _prompt_ids(tokenizer, example.prompt),
        _answer_ids(tokenizer, example.prompt, example.answer),
        max_length,
    )
    base = rejected = None
    if example.base_prompt is not None:
        base, _ = _fit(_prompt_ids(tokenizer, example.base_prompt), answer, max_length)
    if example.rejected is not None:
        ids = _answer_ids(tokenizer, example.prompt, example.rejected)
        rejected = ids[: max(1, max_length - len(prompt))]
    return Encoded(prompt, answer, base, rejected)
