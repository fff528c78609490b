"""Is a hub model id real? Answered before any work, in one line.

A mistyped id (``HuggingFaceTB/SmolLM2-135M-Instuct``) would otherwise pass the plan and the
preflight and fail minutes later inside a model load. The local hub cache answers first (no
network); a cached id is fine. Otherwise, with the hub switched off (``HF_HUB_OFFLINE``) the
id is refused at once; with the hub on, one metadata request (short timeout) says whether the
repository exists, is gated, or cannot be reached. Every refusal names the id and the cached
ids nearest to it.

The BERTScore encoder (``bertscore.model``) is checked the same way, and its refusal says how
to point at a local copy: the paper preset's roberta-large would otherwise fail offline a
minute into ``score-pairs`` with a transformers traceback.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable
from pathlib import Path

from sago_core.errors import ModelNotFoundError

HUB_TIMEOUT_S = 10.0
ENCODER_HINT = (
    "point bertscore.model at a local copy (a folder with its config.json, tokenizer and "
    "weights) in a --config YAML, e.g. 'bertscore: {model: /models/roberta-large}', or use "
    "the embedded encoder: 'bertscore: {model: minilm-l6, num_layers: 6, "
    "semantic_threshold: 0.78}'"
)


def hub_is_off() -> bool:
    """``HF_HUB_OFFLINE`` as huggingface_hub read it at import, or as it is set now."""
    from huggingface_hub.constants import is_offline_mode

    now = os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in {"1", "ON", "YES", "TRUE"}
    return now or is_offline_mode()


def cached_hub_models() -> tuple[str, ...]:
    """The model repositories in the local hub cache (``HF_HUB_CACHE``), sorted."""
    from huggingface_hub import constants, scan_cache_dir

    try:  # the folder named at call time (scan_cache_dir's default is fixed at its import)
        repos = scan_cache_dir(constants.HF_HUB_CACHE).repos
    except Exception:  # no cache folder yet, or an unreadable one: nothing is cached
        return ()
    return tuple(sorted(r.repo_id for r in repos if r.repo_type == "model" and r.revisions))


def nearest_cached(model_id: str, cached: tuple[str, ...]) -> list[str]:
    """Up to three cached ids that look like ``model_id`` (case-insensitive difflib ratio)."""
    by_lower = {name.lower(): name for name in cached}
    found = difflib.get_close_matches(model_id.lower(), list(by_lower), n=3, cutoff=0.6)
    return [by_lower[name] for name in found]


def _hint(model_id: str, cached: tuple[str, ...]) -> str:
    near = nearest_cached(model_id, cached)
    return f"; nearest cached: {', '.join(near)}" if near else "; no similar id is cached"


def uncached_warning(model_id: str) -> str | None:
    """For a plan (no network): a line when ``model_id`` is not in the local cache."""
    cached = cached_hub_models()
    if model_id in cached:
        return None
    return (
        f"hub model {model_id!r} is not in the local hub cache{_hint(model_id, cached)}: "
        "a real run downloads it, or stops before any work when the hub is off or lacks it"
    )


def require_hub_model(model_id: str) -> None:
    """Refuse ``model_id`` unless it is cached or the hub confirms it exists."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    cached = cached_hub_models()
    if model_id in cached:
        return
    hint = _hint(model_id, cached)
    if hub_is_off():
        raise ModelNotFoundError(
            f"hub model {model_id!r} is not in the local hub cache and the hub is off "
            f"(HF_HUB_OFFLINE){hint}"
        )
    try:
        HfApi().model_info(model_id, timeout=HUB_TIMEOUT_S)
    except GatedRepoError as exc:  # exists, but needs an accepted licence and a token
        raise ModelNotFoundError(
            f"hub model {model_id!r} is gated: accept its terms on the hub and set HF_TOKEN"
        ) from exc
    except RepositoryNotFoundError as exc:
        raise ModelNotFoundError(
            f"hub model {model_id!r} does not exist on the hub (or is private: set HF_TOKEN){hint}"
        ) from exc
    except Exception as exc:  # no route, DNS, timeout, proxy: the hub cannot answer
        raise ModelNotFoundError(
            f"hub model {model_id!r} is not in the local hub cache and the hub cannot be "
            f"reached ({type(exc).__name__}){hint}; set HF_HUB_OFFLINE=1 to use cached "
            "models only"
        ) from exc


def _looks_like_path(name: str) -> bool:
    """A hub id is ``name`` or ``organisation/name``; anything else names a folder."""
    return name.startswith(("/", ".", "~")) or name.count("/") > 1


def require_bertscore_encoder(model: str) -> None:
    """Refuse the BERTScore encoder ``model`` (``bertscore.model``: the embedded alias, a
    local folder or a hub id) unless it can be loaded, naming it as the encoder and how to
    point at a local copy."""
    from sago_core.backends.model_source import resolve_bertscore_model

    location = resolve_bertscore_model(model)
    if Path(location).expanduser().is_dir():
        return
    if _looks_like_path(location):
        raise ModelNotFoundError(
            f"BERTScore encoder (bertscore.model) folder {location!r} does not exist; "
            f"{ENCODER_HINT}"
        )
    try:
        require_hub_model(location)
    except ModelNotFoundError as exc:
        raise ModelNotFoundError(
            f"BERTScore encoder (bertscore.model): {exc}; {ENCODER_HINT}"
        ) from exc


def require_models(encoder: str, specs: Iterable[str | None]) -> None:
    """The BERTScore encoder, then the hub weights of each ``BACKEND:ID`` spec in ``specs``
    (None: not used), before any work: a local-weights backend's hub id must be cached or
    confirmed by the hub; an API model or a local folder needs no hub."""
    from sago_core.backends.model_source import (
        EMBEDDED_ALIASES,
        parse_model_spec,
        resolve_local_model,
    )
    from sago_core.registry.backends import backend_spec

    require_bertscore_encoder(encoder)
    for text in specs:
        if text is None:
            continue
        spec = parse_model_spec(text)
        on_disk = spec.model_id in EMBEDDED_ALIASES or Path(spec.model_id).expanduser().exists()
        if backend_spec(spec.backend).weights != "local" or on_disk:
            continue
        local = resolve_local_model(spec.model_id)  # a missing path is refused here
        if local.kind == "hub":
            require_hub_model(local.location)
