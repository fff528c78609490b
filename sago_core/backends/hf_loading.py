"""Loading a transformers model for the backend (hf.py): where its weights go (devices,
placement), the chat template's variables and keyword arguments, and the weights
themselves (safetensors or a GGUF file), with a load failure named by its file."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sago_core.backends.model_source import LocalModel
from sago_core.errors import ConfigError, ModelLoadError


def placement_kwargs(
    device: str, devices: int, gpu_memory: Sequence[int], headroom: float = 0.9
) -> dict[str, Any]:
    """from_pretrained arguments that place the model: nothing for one device, else
    ``device_map="auto"`` over the first ``devices`` GPUs with ``max_memory`` per GPU (no CPU
    entry: a model that does not fit is an error, never silently offloaded).

    ``gpu_memory``: total bytes of each visible GPU (empty on a CPU-only machine)."""
    if devices < 1:
        raise ConfigError(f"devices must be at least 1, got {devices}")
    if devices == 1:
        return {}
    if device == "cpu" or not gpu_memory:
        raise ConfigError(
            f"devices={devices} spreads a model over several GPUs, but this machine has no "
            "visible GPU; use devices=1 on a CPU"
        )
    if devices > len(gpu_memory):
        raise ConfigError(
            f"devices={devices} asks for more GPUs than are visible ({len(gpu_memory)})"
        )
    budget = {i: f"{int(gpu_memory[i] * headroom) // 2**20}MiB" for i in range(devices)}
    return {"device_map": "auto", "max_memory": budget}


def template_variables(template: str | dict[str, str] | None) -> set[str]:
    """Names a chat template reads from its context (jinja2 undeclared variables), over every
    named template when the tokenizer has several. Empty without a template."""
    if not template:
        return set()
    from jinja2 import meta

    sources = template.values() if isinstance(template, dict) else [template]
    names: set[str] = set()
    for source in sources:
        try:  # transformers' own environment knows its extra tags ({% generation %})
            from transformers.utils.chat_template_utils import _compile_jinja_template

            environment = _compile_jinja_template(source).environment
        except Exception:  # fall back to a plain sandbox
            from jinja2.ext import loopcontrols
            from jinja2.sandbox import ImmutableSandboxedEnvironment

            environment = ImmutableSandboxedEnvironment(extensions=[loopcontrols])
        names |= meta.find_undeclared_variables(environment.parse(source))
    return names


def resolve_chat_template_kwargs(
    template: str | dict[str, str] | None,
    requested: Sequence[tuple[str, Any]] | dict[str, Any] | None,
    model_name: str,
) -> dict[str, Any]:
    """Keyword arguments for ``apply_chat_template``. None: thinking off where the template
    offers ``enable_thinking``, else nothing. A key the template never reads is an error (a
    typo would otherwise change nothing, silently)."""
    variables = template_variables(template)
    if requested is None:
        return {"enable_thinking": False} if "enable_thinking" in variables else {}
    chosen = dict(requested)
    if chosen and not template:
        raise ConfigError(
            f"model {model_name}: chat_template_kwargs {sorted(chosen)} given, but the model "
            "has no chat template"
        )
    unknown = sorted(k for k in chosen if k not in variables)
    if unknown:
        raise ConfigError(
            f"model {model_name}: chat_template_kwargs key {unknown[0]!r} is not used by its "
            f"chat template (it reads: {', '.join(sorted(variables)) or 'nothing'})"
        )
    return chosen


def load_pretrained(source: LocalModel, kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """Tokenizer and model; a folder that fails to load is a typed error naming it."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    where = Path(source.location) / (source.gguf_file or "")
    tokenizer_kwargs = {
        k: v for k, v in kwargs.items() if k not in ("dtype", "device_map", "max_memory")
    }
    try:
        tokenizer = AutoTokenizer.from_pretrained(source.location, **tokenizer_kwargs)
        model = AutoModelForCausalLM.from_pretrained(source.location, **kwargs)
    except Exception as exc:  # any failure to load (safetensors, tokenizers, ...) is the folder's
        text = str(exc).strip()
        message = text.splitlines()[0][:300] if text else type(exc).__name__
        raise ModelLoadError(f"model {where} could not be loaded: {message}") from exc
    return tokenizer, model


def find_decoder(model: Any, text_config: Any, where: str) -> tuple[Any, Any]:
    """The text decoder and its list of layers, one per text-config hidden layer."""
    decoder: Any = None
    try:
        decoder = model.get_decoder()
    except Exception:  # handled below
        decoder = None
    for candidate in (decoder, getattr(model, "model", None), model.base_model):
        if candidate is None or candidate is model:
            continue
        if getattr(candidate, "layers", None) is None and hasattr(candidate, "decoder"):
            candidate = candidate.decoder  # OPT-style: model.decoder.layers
        layers = getattr(candidate, "layers", None)
        if layers is not None and len(layers) > 0:
            expected = getattr(text_config, "num_hidden_layers", None)
            if expected is not None and len(layers) > int(expected):
                layers = layers[: int(expected)]
            return candidate, layers
    raise ModelLoadError(
        f"model {where}: its decoder layers could not be found "
        f"({type(model).__name__}); sago needs a decoder with a list of layers"
    )


def stop_ids(model: Any, tokenizer: Any, where: str) -> set[int]:
    """Token ids that end a response: generation_config's and the tokenizer's eos."""
    ids = model.generation_config.eos_token_id
    found: set[int] = set()
    if ids is not None:
        found |= set(ids if isinstance(ids, list) else [ids])
    if tokenizer.eos_token_id is not None:
        found.add(int(tokenizer.eos_token_id))
    if not found:
        raise ModelLoadError(f"model {where}: no end-of-sequence token id")
    return {int(i) for i in found}
