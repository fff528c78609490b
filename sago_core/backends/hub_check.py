"""Is a hub model id real? Answered before any work, in one line.

A mistyped id (``HuggingFaceTB/SmolLM2-135M-Instuct``) would otherwise pass the plan and the
preflight and fail minutes later inside a model load. The local hub cache answers first (no
network); a cached id is fine. Otherwise, with the hub switched off (``HF_HUB_OFFLINE``) the
id is refused at once; with the hub on, one metadata request (short timeout) says whether the
repository exists, is gated, or cannot be reached. Every refusal names the id and the cached
ids nearest to it.
"""

from __future__ import annotations

import difflib
import os

from sago_core.errors import ModelNotFoundError

HUB_TIMEOUT_S = 10.0


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
