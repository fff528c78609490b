"""What decoding means for a transformers model (hf.py): T=0 is argmax at every step, so
the checkpoint's ``generation_config`` is replaced by a clean greedy one keeping only its
token ids (unless the user opts into the checkpoint's defaults); what ``describe()`` reports
of it; and the final-logit scaling a family applies after its output head."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

# Greedy decoding parameters reported by describe() (what generate() actually uses).
DECODING_KEYS = (
    "do_sample",
    "num_beams",
    "temperature",
    "top_k",
    "top_p",
    "min_p",
    "typical_p",
    "repetition_penalty",
    "no_repeat_ngram_size",
    "length_penalty",
    "bad_words_ids",
    "suppress_tokens",
    "begin_suppress_tokens",
    "sequence_bias",
    "forced_bos_token_id",
    "forced_eos_token_id",
    "min_length",
    "min_new_tokens",
)
# What a clean greedy config sets explicitly, so no checkpoint value can fill a gap.
GREEDY = {
    "do_sample": False,
    "num_beams": 1,
    "temperature": 1.0,
    "top_k": None,
    "top_p": 1.0,
    "min_p": None,
    "typical_p": 1.0,
    "repetition_penalty": 1.0,
    "no_repeat_ngram_size": 0,
    "encoder_no_repeat_ngram_size": 0,
    "length_penalty": 1.0,
    "min_length": 0,
    "min_new_tokens": None,
}


def decoding_config(
    checkpoint: Any, use_model_defaults: bool, stop_ids: set[int], pad_id: int
) -> Any:
    """The GenerationConfig generate() runs with: greedy, or the checkpoint's own."""
    from transformers import GenerationConfig

    if use_model_defaults:
        config = copy.deepcopy(checkpoint)
    else:
        config = GenerationConfig(**GREEDY)
        config.bos_token_id = checkpoint.bos_token_id
        config.decoder_start_token_id = checkpoint.decoder_start_token_id
    config.eos_token_id = sorted(stop_ids)
    config.pad_token_id = pad_id
    return config


def effective_decoding(generation_config: Any, use_model_defaults: bool) -> dict[str, Any]:
    """The decoding parameters generate() ends up with (unset ones take transformers'
    global defaults)."""
    from transformers import GenerationConfig

    defaults: dict[str, Any] = {}
    getter = getattr(GenerationConfig, "_get_default_generation_params", None)
    if callable(getter):
        defaults = dict(getter())
    values = generation_config.to_dict()
    effective = {}
    for key in DECODING_KEYS:
        value = values.get(key)
        effective[key] = defaults.get(key) if value is None else value
    if not effective.get("do_sample"):  # warpers are off without sampling
        for key in ("temperature", "top_k", "top_p", "min_p", "typical_p"):
            effective.pop(key, None)
    effective = {k: v for k, v in effective.items() if v is not None}
    effective["source"] = (
        "checkpoint generation_config" if use_model_defaults else "greedy (argmax)"
    )
    return effective


def logit_transform(text_config: Any) -> tuple[Callable[[Any], Any] | None, str]:
    """The final-logit scaling the family applies after the head, from the text config."""
    import torch

    softcap = getattr(text_config, "final_logit_softcapping", None)
    scale = getattr(text_config, "logit_scale", None)  # Cohere: logits * logit_scale
    divisor = getattr(text_config, "logits_scaling", None)  # Granite: logits / logits_scaling
    steps: list[Callable[[Any], Any]] = []
    notes = []
    if isinstance(scale, (int, float)) and scale != 1:
        steps.append(lambda x: x * scale)
        notes.append(f"x{scale}")
    if isinstance(divisor, (int, float)) and divisor != 1:
        steps.append(lambda x: x / divisor)
        notes.append(f"/{divisor}")
    if softcap:
        steps.append(lambda x: torch.tanh(x / softcap) * softcap)
        notes.append(f"softcap {softcap}")
    if not steps:
        return None, "head"

    def transform(x: Any) -> Any:
        for step in steps:
            x = step(x)
        return x

    return transform, "head " + " ".join(notes)
