"""GGUF -> a plain safetensors folder, once per file (keyed by its sha256).

vLLM cannot read every GGUF layout, and a fine-tuning or quantisation series needs ordinary
weights. transformers dequantises the GGUF on load; the weights are copied into a model
built from the same config without ``quantization_config`` and saved with the tokenizer
(chat template included). The folder is built in a temporary sibling and renamed into
place, so a killed build never leaves a half folder behind.
"""

from __future__ import annotations

import copy
import shutil
import tempfile
from pathlib import Path
from typing import Any

from sago_core.backends.model_source import LocalModel


def plain_copy(model: Any) -> Any:
    """A model loaded from GGUF rebuilt without its quantisation config (float32)."""
    import torch
    from transformers import AutoModelForCausalLM

    config = copy.deepcopy(model.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(model.state_dict())
    plain.generation_config = model.generation_config
    return plain


def materialised_folder(source: LocalModel, cache_root: Path) -> Path:
    """The safetensors folder for a GGUF model (built on first use); a folder model as is."""
    if source.kind != "gguf" or not source.gguf_file:
        return Path(source.location)
    digest = source.identity.removeprefix("sha256:")[:16]
    target = cache_root / f"{Path(source.gguf_file).stem}-{digest}"
    if (target / "config.json").is_file():
        return target
    import torch

    from sago_core.backends.gguf_probe import probe_gguf
    from sago_core.backends.hf_loading import load_pretrained

    probe_gguf(Path(source.location) / source.gguf_file)
    kwargs: dict[str, Any] = {"gguf_file": source.gguf_file, "trust_remote_code": False}
    tokenizer, loaded = load_pretrained(source, {**kwargs, "dtype": torch.float32})
    cache_root.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=".building-", dir=cache_root))
    try:
        plain_copy(loaded).save_pretrained(building, safe_serialization=True)
        tokenizer.save_pretrained(building)
        building.rename(target)
    except OSError:
        if not (target / "config.json").is_file():
            raise
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return target
