"""The backends sago can open, each declared once: the one place that knows backend names.

A declaration (``BackendSpec``) says what the spec prefix is (``hf`` in ``hf:MODEL``), how to
build an engine from a ``ModelTarget`` (a ``"module:function"`` imported on first use, so
importing this registry imports neither torch, vLLM nor LiteLLM), where its model lives
(local weights, an API endpoint, nothing), which ``RunConfig`` settings its targets carry,
which shared places it writes to, and what it can measure. Everything that used to branch
on a backend's name reads these declarations instead: the model-spec check of the config
(``backend_names``), ``ModelTarget``, the factory, the judge task and the dry-run plan.

Adding a backend: one module with its class and an ``open_target`` function (heavy imports
inside it), plus one ``BackendSpec`` line in ``BUILTIN`` below, or the same declaration in
another package's ``sago.backends`` entry point (``registry/plugins.py``; read on the first
use of this registry); ``registered`` for a test, undone on exit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from sago_core.errors import ConfigError
from sago_core.registry import plugins

# What a backend can measure beyond generating text: the teacher-forced pass's hidden
# states (Act) and log-probabilities/entropies (Prob, Ent), and activation patching.
Capability = Literal["activations", "logprobs", "patching"]
# Where a backend's model is: local weights (resolved and hashed at the edge), an API
# endpoint (metered requests, a key, the spending ledger), or nothing (a deterministic mock).
Weights = Literal["local", "endpoint", "none"]
# The shared places a backend writes to (``BackendPlaces`` fields).
Place = Literal["cache", "ledger"]
# The ``RunConfig`` field holding a backend's own options, copied into its targets only.
Settings = Literal["vllm", "api"]
# (target: ModelTarget, places: BackendPlaces, api_key: str | None, device: str) -> a
# Backend (sago_core.backends.protocol; the registry imports none of them: they import it).
Builder = Callable[..., Any]


@dataclass(frozen=True)
class BackendSpec:
    name: str  # the spec prefix, ``NAME:MODEL``
    build: str | Builder  # "package.module:function" (imported on first build) or the function
    weights: Weights
    capabilities: frozenset[Capability] = frozenset()
    settings: Settings | None = None
    places: frozenset[Place] = frozenset()
    summary: str = ""

    @property
    def is_api(self) -> bool:
        return self.weights == "endpoint"

    @property
    def teacher_forced(self) -> bool:
        """Whether the teacher-forced pass measures anything on it (Act, Prob, Ent)."""
        return bool(self.capabilities & {"activations", "logprobs"})

    def builder(self) -> Builder:
        built: Builder = plugins.resolve(self.build)
        return built


_ALL: frozenset[Capability] = frozenset({"activations", "logprobs", "patching"})

BUILTIN: tuple[BackendSpec, ...] = (
    BackendSpec(
        "hf",
        "sago_core.backends.hf:open_target",
        "local",
        _ALL,
        summary="transformers (or GGUF through it), in this process",
    ),
    BackendSpec(
        "vllm",
        "sago_core.backends.vllm_backend:open_target",
        "local",
        _ALL,  # teacher forcing and patching through its transformers scorer
        settings="vllm",
        places=frozenset({"cache"}),
        summary="vLLM engines in worker processes of the vLLM environment",
    ),
    BackendSpec(
        "litellm",
        "sago_core.backends.api:open_target",
        "endpoint",
        settings="api",
        places=frozenset({"cache", "ledger"}),
        summary="API models through LiteLLM (generation only)",
    ),
    BackendSpec(
        "mock",
        "sago_core.backends.mock:open_target",
        "none",
        frozenset({"activations", "logprobs"}),
        summary="deterministic test backend, no weights",
    ),
)


def _check(spec: BackendSpec) -> None:
    if not spec.name or ":" in spec.name:
        raise ValueError(f"backend name {spec.name!r} must be non-empty and hold no ':'")


_REGISTRY = plugins.Registry(plugins.BACKENDS, BackendSpec, _check, BUILTIN)
registered = _REGISTRY.registered  # for the ``with`` block only (tests, plug-ins tried out)


def backend_names() -> tuple[str, ...]:
    """Every registered backend name, in registration order (the config's allowed values)."""
    return tuple(_REGISTRY.loaded())


def backend_spec(name: str) -> BackendSpec:
    return _REGISTRY.get(name, ConfigError)


def local_backends() -> tuple[str, ...]:
    """The backends whose models are local weights (resolved before anything loads)."""
    return tuple(n for n, s in _REGISTRY.loaded().items() if s.weights == "local")
