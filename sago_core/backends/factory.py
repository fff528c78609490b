"""Pick a backend by spec; build each engine once per worker process and reuse it."""

from __future__ import annotations

from functools import lru_cache

from sago_core.backends.model_source import parse_model_spec, resolve_local_model
from sago_core.backends.protocol import Backend
from sago_core.errors import ConfigError


def check_backend_available(spec_text: str) -> None:
    """Fail before any model is loaded if the spec names a backend this build lacks."""
    spec = parse_model_spec(spec_text)
    if spec.backend != "hf":
        raise ConfigError(
            f"model {spec_text!r}: the {spec.backend!r} backend is not available yet; "
            "use hf:<path|hub id|smollm2-135m>"
        )


@lru_cache(maxsize=2)
def get_backend(spec_text: str, device: str = "cpu") -> Backend:
    """The process-wide engine for a model spec (loaded on first use)."""
    check_backend_available(spec_text)
    spec = parse_model_spec(spec_text)
    from sago_core.backends.hf import HFBackend

    return HFBackend(resolve_local_model(spec.model_id), device=device)
