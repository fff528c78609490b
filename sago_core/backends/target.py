"""What identifies and configures one model: a ``ModelTarget``, built once at the edge.

Every backend is built from a target: the evaluated models, the structural rewriter, the
register judge and the consistency study's checkpoints alike, so a model spec means the same
engine (same weights, rendering, decoding, trust and API settings) wherever it is used. A
target holds only what determines results; where files go (caches, the spending ledger)
comes from the run layout, and API keys are resolved inside the task that needs them.

Each target carries only its own backend's options: changing the vLLM settings never changes
a transformers target, so it never invalidates transformers results.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, field_validator

from sago_core.backends.model_source import LocalModel, parse_model_spec, resolve_local_model
from sago_core.config import ApiSettings, RunConfig, TemplateKwargs, VllmSettings
from sago_core.errors import ModelNotFoundError
from sago_core.registry import plugins
from sago_core.registry.backends import BackendSpec, backend_spec


class ModelTarget(BaseModel):
    """A model spec, resolved: its weights (or API endpoint) and every option of its backend."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    spec: str
    backend: str  # a registered backend name (sago_core.registry.backends)
    model_id: str
    identity: str  # weights digest, hub revision or API endpoint: what the caches key on
    source: LocalModel | None = None  # where local weights are (None for API models)
    trust_remote_code: bool = False
    chat_template_kwargs: TemplateKwargs | None = None
    use_model_defaults: bool = False
    devices: int = 1  # devices one worker spreads the model over
    vllm: VllmSettings | None = None
    api: ApiSettings | None = None

    @field_validator("backend")
    @classmethod
    def _registered(cls, value: str) -> str:
        backend_spec(value)  # raises, naming the registered ones
        return value

    @property
    def declared(self) -> BackendSpec:
        """Its backend's declaration: where the model lives, what it can measure."""
        return backend_spec(self.backend)

    @property
    def is_api(self) -> bool:
        return self.declared.is_api

    def describe(self) -> dict[str, str | None]:
        """The provenance record of the model (manifest and report)."""
        named: dict[str, str | None] = {"spec": self.spec, "identity": self.identity}
        if self.source is None:
            endpoint = (self.api.base_url if self.api else None) or "provider-default"
            return named | {"kind": "api", "location": endpoint, "gguf_file": None}
        return named | {
            "kind": self.source.kind,
            "location": self.source.location,
            "gguf_file": self.source.gguf_file,
        }


def api_identity(model_id: str, api: ApiSettings) -> str:
    return f"api:{model_id}@{api.base_url or 'provider-default'}"


def model_target(
    config: RunConfig, spec_text: str, source: LocalModel | None = None, devices: int = 1
) -> ModelTarget:
    """The target of ``spec_text`` under ``config``; ``source``: weights already resolved
    (resolving hashes a GGUF file, so it is done once per spec); ``devices``: how many
    devices one worker spreads it over (evaluated models only: tools run in the flow)."""
    spec = parse_model_spec(spec_text)
    declared = backend_spec(spec.backend)
    settings = {declared.settings: getattr(config, declared.settings)} if declared.settings else {}
    if declared.weights == "none":
        return ModelTarget(
            spec=spec.text, backend=spec.backend, model_id=spec.model_id, identity=spec.text
        )
    if declared.weights == "endpoint":
        return ModelTarget(
            spec=spec.text,
            backend=spec.backend,
            model_id=spec.model_id,
            identity=api_identity(spec.model_id, config.api),
            **settings,
        )
    local = source or resolve_local_model(spec.model_id)
    generation = config.generation
    return ModelTarget(
        spec=spec.text,
        backend=spec.backend,
        model_id=spec.model_id,
        identity=local.identity,
        source=local,
        trust_remote_code=spec_text in config.trust_remote_code,
        chat_template_kwargs=generation.chat_template_kwargs,
        use_model_defaults=generation.use_model_defaults,
        devices=devices,
        **settings,
    )


class RunTargets(BaseModel):
    """Every model a run uses: the evaluated models (on the shard workers, each spread over
    ``devices_per_worker`` devices) and the tools the flow itself runs (the structural
    rewriter, the translator and the judge, one device). A tool that is also an evaluated
    model reuses its resolved weights, and with one device per worker it is the very same
    target, so the same engine."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    models: dict[str, ModelTarget]
    rewriter: ModelTarget | None = None
    translator: ModelTarget | None = None
    judge: ModelTarget | None = None
    refusal_judge: ModelTarget | None = None  # config.refusal.judge, only when named

    def tools(self) -> list[ModelTarget]:
        tools = (self.rewriter, self.translator, self.judge, self.refusal_judge)
        return [t for t in tools if t is not None]


def run_targets(config: RunConfig) -> RunTargets:
    """Resolve every model of ``config`` once (the ``resolve-inputs`` task does this)."""
    per_worker = config.orchestration.devices_per_worker
    models = {m: model_target(config, m, devices=per_worker) for m in config.models}

    def tool(spec: str | None) -> ModelTarget | None:
        if spec is None:
            return None
        known = models.get(spec)
        return model_target(config, spec, known.source if known else None)

    structural, translation = config.variants.structural, config.variants.translation
    return RunTargets(
        models=models,
        rewriter=tool(structural.rewriter if structural else None),
        translator=tool(translation.translator if translation else None),
        judge=tool(config.register_judge.model),
        refusal_judge=tool(config.refusal.judge),
    )


def cache_fingerprint(target: ModelTarget) -> str:
    """What of a target determines results, for cache keys: everything but where the
    weights happen to lie (their identity is the content)."""
    payload = target.model_dump(mode="json")
    if payload.get("source"):
        payload["source"].pop("location", None)
    plugin = plugins.version_of(plugins.BACKENDS, target.backend)
    if plugin is not None:  # a plug-in's code is not in sago's code versions: its version is
        payload["plugin"] = plugin
    return json.dumps(payload, sort_keys=True)


def behaviour_key(target: ModelTarget) -> str:
    """The identity a tool's answers are cached under (structural rewrites, judge verdicts):
    the weights or endpoint, plus the rendering and decoding options that change answers
    (left out when they are the defaults, so default runs keep their caches)."""
    options = {
        "chat_template_kwargs": dict(target.chat_template_kwargs)
        if target.chat_template_kwargs is not None
        else None,
        "use_model_defaults": target.use_model_defaults,
    }
    if target.is_api or options == {"chat_template_kwargs": None, "use_model_defaults": False}:
        return target.identity
    return f"{target.identity}|{json.dumps(options, sort_keys=True)}"


def relocated(target: ModelTarget) -> ModelTarget:
    """``target`` on this machine: a worker elsewhere finds the weights under its own path
    (re-resolved from the model id), and they must be the same weights."""
    source = target.source
    if source is None or source.kind == "hub" or Path(source.location).exists():
        return target
    local = resolve_local_model(target.model_id)
    if local.identity != target.identity:
        raise ModelNotFoundError(
            f"model {target.spec!r}: this machine has other weights ({local.identity}) than "
            f"the run was started with ({target.identity})"
        )
    return target.model_copy(update={"source": local})
