"""The model ``sago train`` fine-tunes: its weights found (refused before anything loads when
there are none to train), loaded in float32, and its LoRA settings.

Only ``hf:`` models with float weights are trained: an API model has no weights here, and a
GGUF file holds quantised ones that LoRA cannot train. The embedded model is the exception
that makes the tutorial run offline: its GGUF is dequantised once into a plain safetensors
folder (``materialise.py``, the same folder vLLM uses), which is what gets trained.
"""

from __future__ import annotations

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
