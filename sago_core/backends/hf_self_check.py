"""The transformers backend's load-time self-check (hf.py): the fast scoring path (decoder
hooks, the head at response positions only, a shared-prefix cache) is compared with the
model's own full forward on a short padded batch, and the fastest setting that agrees is
kept; where none agrees, the model is scored through its own forward, and ``describe()``
says so."""

from __future__ import annotations

from typing import Any

from sago_core.backends.hf_hooks import tensors_close
from sago_core.errors import ModelLoadError

# The backend is hf.py's HFBackend, typed Any here: hf.py imports this module.
HFBackend = Any

PROBE_PROMPTS = ("Hi", "Which river runs through the middle of Paris, and how long is it?")
PROBE_RESPONSE = " The Seine, about 777 km long."


def _probe_rows(backend: HFBackend) -> tuple[list[Any], list[list[int]]]:
    encoded = [backend._encode(p) for p in PROBE_PROMPTS]
    response = backend.tokenizer(PROBE_RESPONSE, add_special_tokens=False)["input_ids"]
    response = [*list(response)[:6], min(backend.stop_ids)]
    return encoded, [e.ids + response for e in encoded]


def _probe(
    backend: HFBackend, encoded: list[Any], rows: list[list[int]], n_resp: int, exact: bool
) -> list[Any]:
    """Every tensor the scoring pass yields for the probe rows, in a fixed order."""
    out: dict[int, list[Any]] = {}
    for index, hidden, user, logits, _ in backend._score_rows(
        encoded, rows, [n_resp] * len(rows), exact
    ):
        out[index] = [hidden, user, logits]
    return [t for i in sorted(out) for t in out[i]]


def self_check(backend: HFBackend) -> str:
    """Set the backend's scoring path (``exact``, ``logit_transform``, ``use_prefix``) to the
    fastest that agrees with the model's own forward, and say which. The model's own forward
    failing is a ModelLoadError."""
    torch = backend._torch
    encoded, rows = _probe_rows(backend)
    n_resp = len(rows[0]) - len(encoded[0].ids)
    dtype = next(backend.model.parameters()).dtype
    try:
        with torch.inference_mode():
            exact = _probe(backend, encoded, rows, n_resp, exact=True)
    except Exception as exc:  # a model that cannot run is the folder's
        raise ModelLoadError(
            f"model {backend.where}: its forward pass failed on a test batch: "
            f"{type(exc).__name__}: {str(exc).strip()[:300]}"
        ) from exc
    transforms = [(backend.logit_transform, backend.logit_note)]
    if backend.logit_transform is not None:
        transforms.append((None, "head (config scaling not applied by the model)"))
    errors: list[str] = []
    for use_prefix in (True, False):
        for transform, note in transforms:
            backend.logit_transform, backend.use_prefix = transform, use_prefix
            try:
                with torch.inference_mode():
                    fast = _probe(backend, encoded, rows, n_resp, exact=False)
            except Exception as exc:  # the slow path still works
                errors.append(f"{type(exc).__name__}: {str(exc)[:120]}")
                continue
            worst = 0.0
            agree = True
            for a, b in zip(fast, exact, strict=True):
                ok, error = tensors_close(a, b, dtype)
                agree, worst = agree and ok, max(worst, error)
            if agree:
                prefix = "" if use_prefix else ", shared-prefix cache off"
                return f"fast ({note}{prefix}; max |diff| {worst:.2e} vs own forward)"
            errors.append(f"{note}: max |diff| {worst:.2e}")
    backend.exact, backend.logit_transform, backend.use_prefix = True, None, False
    return "slow: model's own forward (fast path disagreed: " + "; ".join(errors) + ")"
