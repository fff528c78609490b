"""Tiny random-weight models of each family the transformers backend must get right.

Each builder writes, into a folder, a 2-3 layer model (hidden size 64, fixed seed) made from
the family's own transformers config class, with the embedded SmolLM2 tokenizer and a chat
template where the family has one. The templates are written for these tests: they follow
each family's layout (headers, default system prompt, thinking block), not its wording.

``FAMILIES`` maps a family name to its builder; ``build_family(name, folder)`` builds one.
Weights are drawn larger than the default init (std ``WEIGHT_STD``) so greedy answers vary
from token to token instead of repeating one token.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

SEED = 0
WEIGHT_STD = 0.5
# Gemma scales its input embeddings by sqrt(hidden) and ties the head to them: a smaller
# spread keeps logits around the softcap (5.0), where capping changes them without
# flattening them all to the cap.
GEMMA_STD = 0.2
PENALISED_STD = 0.05
HIDDEN = 64
HEAD_DIM = 16  # where a family sets its head size apart from hidden / heads
MAX_POSITIONS = 1024

# Templates of this project. Every one ends the assistant header with a newline, as the
# families do, and closes a turn with the tokenizer's end-of-sequence token.
LLAMA_TEMPLATE = (
    "{{ bos_token }}"
    "{% if messages[0].role == 'system' %}"
    "{% set system = messages[0].content | trim %}{% set messages = messages[1:] %}"
    "{% else %}{% set system = 'You are a careful assistant. Knowledge cut-off: 2024.' %}"
    "{% endif %}"
    "<|im_start|>[system]\n\n{{ system }}<|im_end|>"
    "{% for message in messages %}"
    "<|im_start|>[{{ message.role }}]\n\n{{ message.content | trim }}<|im_end|>"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>[assistant]\n\n{% endif %}"
)
GEMMA_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% set role = 'model' if message.role == 'assistant' else message.role %}"
    "<|im_start|>{{ role }}\n{{ message.content | trim }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>model\n{% endif %}"
)
CHATML_TEMPLATE = (
    "{% if messages[0].role != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant for short questions.<|im_end|>\n"
    "{% endif %}"
    "{% for message in messages %}"
    "<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# Behaves like Qwen3's: thinking is on unless ``enable_thinking`` is false, and then an empty
# think block is written after the assistant header so the model answers at once.
THINKING_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}"
    "<think>\n\n</think>\n\n"
    "{% endif %}"
    "{% endif %}"
)
OLMO_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "<|im_start|>{{ message.role }}\n{{ message.content }}\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
EMPTY_THINK_BLOCK = "<think>\n\n</think>\n\n"


@lru_cache(maxsize=1)
def _tokenizer_folder() -> str:
    """The embedded SmolLM2 GGUF's tokenizer, converted once and saved as a plain folder."""
    import tempfile

    from transformers import AutoTokenizer

    from sago_core.backends.model_source import EMBEDDED_ALIASES, packaged_file

    gguf = packaged_file(*EMBEDDED_ALIASES["smollm2-135m"])
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    folder = tempfile.mkdtemp(prefix="sago-families-tokenizer-")
    tokenizer.save_pretrained(folder)
    return folder


def load_tokenizer(template: str | None) -> Any:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(_tokenizer_folder())
    tokenizer.chat_template = template
    return tokenizer


def _token_ids(tokenizer: Any) -> dict[str, Any]:
    return {
        "vocab_size": len(tokenizer),
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }


def _widen(model: Any, std: float = WEIGHT_STD) -> None:
    """Redraw every matrix (not the norms or biases) with a larger spread: random models
    whose default init is tiny answer with one token everywhere."""
    import torch

    generator = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if parameter.dim() >= 2 and "norm" not in name:
                fresh = torch.randn(parameter.shape, generator=generator) * std
                parameter.copy_(fresh / max(1.0, parameter.shape[-1] ** 0.5 / 8))


def _save(
    model: Any,
    tokenizer: Any,
    folder: Path,
    generation: dict[str, Any] | None,
    std: float = WEIGHT_STD,
) -> Path:
    _widen(model, std)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    if tokenizer.chat_template is None:
        for name in ("chat_template.jinja", "chat_template.json"):
            (folder / name).unlink(missing_ok=True)
        settings = folder / "tokenizer_config.json"
        data = json.loads(settings.read_text())
        data.pop("chat_template", None)
        settings.write_text(json.dumps(data, indent=2))
    if generation is not None:
        (folder / "generation_config.json").write_text(json.dumps(generation, indent=2))
    return folder


def _seeded() -> None:
    import torch

    torch.manual_seed(SEED)


def build_llama(
    folder: Path, generation: dict[str, Any] | None = None, std: float = WEIGHT_STD
) -> Path:
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = load_tokenizer(LLAMA_TEMPLATE)
    config = LlamaConfig(
        hidden_size=HIDDEN,
        intermediate_size=128,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=MAX_POSITIONS,
        tie_word_embeddings=False,
        **_token_ids(tokenizer),
    )
    _seeded()
    return _save(LlamaForCausalLM(config), tokenizer, folder, generation, std)


# What a checkpoint might ship: greedy answers under these defaults are not argmax answers.
PENALISING_GENERATION = {
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 2,
    "repetition_penalty": 5.0,
    "no_repeat_ngram_size": 2,
}


def build_llama_penalised(folder: Path) -> Path:
    """A Llama whose generation_config asks for a repetition penalty (and no repeated
    2-grams): sago's T=0 must ignore both. Small weights, so that its argmax answers repeat
    tokens and the penalty changes them."""
    return build_llama(folder, generation=PENALISING_GENERATION, std=PENALISED_STD)


def build_gemma2(folder: Path) -> Path:
    from transformers import Gemma2Config, Gemma2ForCausalLM

    tokenizer = load_tokenizer(GEMMA_TEMPLATE)
    config = Gemma2Config(
        hidden_size=HIDDEN,
        intermediate_size=128,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=HEAD_DIM,
        max_position_embeddings=MAX_POSITIONS,
        sliding_window=16,
        query_pre_attn_scalar=HEAD_DIM,
        final_logit_softcapping=5.0,
        attn_logit_softcapping=20.0,
        **_token_ids(tokenizer),
    )
    _seeded()
    return _save(Gemma2ForCausalLM(config), tokenizer, folder, None, GEMMA_STD)


def _gemma3_text_config(tokenizer: Any) -> Any:
    from transformers import Gemma3TextConfig

    return Gemma3TextConfig(
        hidden_size=HIDDEN,
        intermediate_size=128,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=HEAD_DIM,
        max_position_embeddings=MAX_POSITIONS,
        sliding_window=16,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"],
        query_pre_attn_scalar=HEAD_DIM,
        final_logit_softcapping=5.0,
        **_token_ids(tokenizer),
    )


def build_gemma3_text(folder: Path) -> Path:
    from transformers import Gemma3ForCausalLM

    tokenizer = load_tokenizer(GEMMA_TEMPLATE)
    _seeded()
    model = Gemma3ForCausalLM(_gemma3_text_config(tokenizer))
    return _save(model, tokenizer, folder, None, GEMMA_STD)


def build_gemma3_multimodal(folder: Path) -> Path:
    """Gemma3Config with a text and a tiny vision config: transformers loads it as
    Gemma3ForConditionalGeneration, with the layer count and softcapping in text_config."""
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration, SiglipVisionConfig

    tokenizer = load_tokenizer(GEMMA_TEMPLATE)
    text = _gemma3_text_config(tokenizer)
    vision = SiglipVisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        image_size=28,
        patch_size=14,
    )
    ids = _token_ids(tokenizer)
    config = Gemma3Config(
        text_config=text,
        vision_config=vision,
        mm_tokens_per_image=4,
        image_token_id=ids["vocab_size"] - 1,
        boi_token_id=ids["vocab_size"] - 2,
        eoi_token_id=ids["vocab_size"] - 3,
        bos_token_id=ids["bos_token_id"],
        eos_token_id=ids["eos_token_id"],
        pad_token_id=ids["pad_token_id"],
    )
    _seeded()
    model = Gemma3ForConditionalGeneration(config)
    return _save(model, tokenizer, folder, None, GEMMA_STD)


def _gemma3n_text_config(tokenizer: Any) -> Any:
    from transformers import Gemma3nTextConfig

    ids = _token_ids(tokenizer)
    return Gemma3nTextConfig(
        hidden_size=HIDDEN,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=HEAD_DIM,
        max_position_embeddings=MAX_POSITIONS,
        sliding_window=16,
        layer_types=["sliding_attention", "full_attention"] * 2,
        hidden_size_per_layer_input=8,
        vocab_size_per_layer_input=ids["vocab_size"],
        num_kv_shared_layers=2,  # the last two layers reuse the first two's keys and values
        laurel_rank=8,
        altup_num_inputs=2,
        activation_sparsity_pattern=[0.0] * 4,
        final_logit_softcapping=5.0,
        **ids,
    )


def build_gemma3n(folder: Path) -> Path:
    """Gemma3n's text model (per-layer inputs, AltUp, softcapping). The multimodal
    Gemma3nForConditionalGeneration builds its vision tower through timm, which this
    environment lacks, so the text model stands in for the family."""
    from transformers import Gemma3nForCausalLM

    tokenizer = load_tokenizer(GEMMA_TEMPLATE)
    _seeded()
    model = Gemma3nForCausalLM(_gemma3n_text_config(tokenizer))
    return _save(model, tokenizer, folder, None, GEMMA_STD)


def build_qwen2(folder: Path) -> Path:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tokenizer = load_tokenizer(CHATML_TEMPLATE)
    config = Qwen2Config(
        hidden_size=HIDDEN,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=MAX_POSITIONS,
        tie_word_embeddings=True,
        **_token_ids(tokenizer),
    )
    _seeded()
    return _save(Qwen2ForCausalLM(config), tokenizer, folder, None)


def build_qwen3(folder: Path) -> Path:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    tokenizer = load_tokenizer(THINKING_TEMPLATE)
    config = Qwen3Config(
        hidden_size=HIDDEN,
        intermediate_size=128,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=HEAD_DIM,
        max_position_embeddings=MAX_POSITIONS,
        tie_word_embeddings=True,
        **_token_ids(tokenizer),
    )
    _seeded()
    return _save(Qwen3ForCausalLM(config), tokenizer, folder, None)


def build_opt(folder: Path) -> Path:
    """OPT: no chat template (the plain prompt with special tokens), learned positions."""
    from transformers import OPTConfig, OPTForCausalLM

    tokenizer = load_tokenizer(None)
    config = OPTConfig(
        hidden_size=HIDDEN,
        ffn_dim=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        word_embed_proj_dim=HIDDEN,
        max_position_embeddings=MAX_POSITIONS,
        **_token_ids(tokenizer),
    )
    _seeded()
    return _save(OPTForCausalLM(config), tokenizer, folder, None)


def build_olmo2(folder: Path) -> Path:
    from transformers import Olmo2Config, Olmo2ForCausalLM

    tokenizer = load_tokenizer(OLMO_TEMPLATE)
    config = Olmo2Config(
        hidden_size=HIDDEN,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=MAX_POSITIONS,
        **_token_ids(tokenizer),
    )
    _seeded()
    return _save(Olmo2ForCausalLM(config), tokenizer, folder, None)


FAMILIES: dict[str, Callable[[Path], Path]] = {
    "llama": build_llama,
    "gemma2": build_gemma2,
    "gemma3-text": build_gemma3_text,
    "gemma3-multimodal": build_gemma3_multimodal,
    "gemma3n": build_gemma3n,
    "qwen2": build_qwen2,
    "qwen3-thinking": build_qwen3,
    "opt": build_opt,
    "olmo2": build_olmo2,
}
# Checkpoints built for one behaviour, not a family of their own.
SPECIAL: dict[str, Callable[[Path], Path]] = {"llama-penalised": build_llama_penalised}


def build_family(name: str, folder: Path) -> Path:
    """Build the named model into ``folder`` (created) and return it."""
    builders = {**FAMILIES, **SPECIAL}
    if name not in builders:
        raise KeyError(f"unknown family {name!r}; known: {', '.join(sorted(builders))}")
    return builders[name](Path(folder))
