"""Pick a backend by spec; build each engine once per worker process and reuse it."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from sago_core.backends.model_source import parse_model_spec, resolve_local_model
from sago_core.backends.protocol import Backend
from sago_core.config import ApiBudget, ApiSettings, VllmSettings
from sago_core.errors import ConfigError

AVAILABLE = ("hf", "vllm", "litellm")


def check_backend_available(spec_text: str) -> None:
    """Fail before any model is loaded if the spec names a backend this build lacks."""
    spec = parse_model_spec(spec_text)
    if spec.backend not in AVAILABLE:
        raise ConfigError(
            f"model {spec_text!r}: the {spec.backend!r} backend is not available; "
            f"use one of {', '.join(AVAILABLE)}"
        )


def is_api_model(spec_text: str) -> bool:
    return parse_model_spec(spec_text).backend == "litellm"


@lru_cache(maxsize=8)
def get_ledger(path: str, budget: ApiBudget):  # type: ignore[no-untyped-def]
    """One ledger per run file in this process, shared by every API model and the judge."""
    from sago_core.backends.api_ledger import ApiLedger

    return ApiLedger(Path(path), budget)


@lru_cache(maxsize=8)
def get_backend(
    spec_text: str,
    device: str = "auto",
    api: ApiSettings | None = None,
    api_cache_dir: str | None = None,
    ledger_file: str | None = None,
    api_key: str | None = None,
    vllm: VllmSettings | None = None,
    weights_cache_dir: str | None = None,
    trust_remote_code: bool = False,
) -> Backend:
    """The process-wide engine for a model spec (loaded on first use). ``trust_remote_code``
    only for models the user listed under ``trust_remote_code``."""
    check_backend_available(spec_text)
    spec = parse_model_spec(spec_text)
    if spec.backend == "litellm":
        if api is None or api_cache_dir is None or ledger_file is None:
            raise ConfigError(f"model {spec_text!r} needs the api settings, cache and ledger")
        from sago_core.backends.api import ApiBackend

        ledger = get_ledger(ledger_file, api.budget)
        return ApiBackend(spec.model_id, api, Path(api_cache_dir), ledger, api_key)
    if spec.backend == "vllm":
        from sago_core.backends.vllm_backend import VllmBackend

        root = Path(weights_cache_dir or Path.cwd() / "runs" / ".cache" / "materialised")
        source = resolve_local_model(spec.model_id)
        return VllmBackend(source, vllm or VllmSettings(), root, trust_remote_code)
    from sago_core.backends.hf import HFBackend

    return HFBackend(
        resolve_local_model(spec.model_id), device=device, trust_remote_code=trust_remote_code
    )
