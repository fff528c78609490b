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

from typing import Literal

from pydantic import BaseModel, ConfigDict

from sago_core.backends.model_source import LocalModel, parse_model_spec, resolve_local_model
from sago_core.config import ApiSettings, RunConfig, TemplateKwargs, VllmSettings

BackendName = Literal["hf", "vllm", "litellm", "mock"]


class ModelTarget(BaseModel):
    """A model spec, resolved: its weights (or API endpoint) and every option of its backend."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    spec: str
    backend: BackendName
    model_id: str
    identity: str  # weights digest, hub revision or API endpoint: what the caches key on
    source: LocalModel | None = None  # where local weights are (None for API models)
    trust_remote_code: bool = False
    chat_template_kwargs: TemplateKwargs | None = None
    use_model_defaults: bool = False
    devices: int = 1  # devices one worker spreads the model over
    vllm: VllmSettings | None = None
    api: ApiSettings | None = None

    @property
    def is_api(self) -> bool:
        return self.backend == "litellm"

    def describe(self) -> dict[str, str | None]:
        """The provenance record of the model (manifest and report)."""
        if self.source is None:
            endpoint = (self.api.base_url if self.api else None) or "provider-default"
            return {
                "spec": self.spec,
                "identity": self.identity,
                "kind": "api",
                "location": endpoint,
                "gguf_file": None,
            }
        return {
            "spec": self.spec,
            "identity": self.identity,
            "kind": self.source.kind,
            "location": self.source.location,
            "gguf_file": self.source.gguf_file,
        }


def api_identity(model_id: str, api: ApiSettings) -> str:
    return f"api:{model_id}@{api.base_url or 'provider-default'}"


def model_target(
    config: RunConfig, spec_text: str, source: LocalModel | None = None
) -> ModelTarget:
    """The target of ``spec_text`` under ``config``; ``source``: weights already resolved
    (resolving hashes a GGUF file, so it is done once per spec)."""
    spec = parse_model_spec(spec_text)
    generation = config.generation
    if spec.backend == "mock":
        return ModelTarget(
            spec=spec.text, backend="mock", model_id=spec.model_id, identity=spec.text
        )
    if spec.backend == "litellm":
        return ModelTarget(
            spec=spec.text,
            backend="litellm",
            model_id=spec.model_id,
            identity=api_identity(spec.model_id, config.api),
            api=config.api,
        )
    local = source or resolve_local_model(spec.model_id)
    return ModelTarget(
        spec=spec.text,
        backend=spec.backend,  # type: ignore[arg-type]
        model_id=spec.model_id,
        identity=local.identity,
        source=local,
        trust_remote_code=spec_text in config.trust_remote_code,
        chat_template_kwargs=generation.chat_template_kwargs,
        use_model_defaults=generation.use_model_defaults,
        devices=config.orchestration.devices_per_worker,
        vllm=config.vllm if spec.backend == "vllm" else None,
    )


def run_targets(config: RunConfig) -> dict[str, ModelTarget]:
    """One target per spec the run uses (evaluated models, rewriter, judge); a spec used
    twice (a model that is also the rewriter) is resolved once, so it shares its engine."""
    structural = config.variants.structural
    specs = [*config.models, structural.rewriter if structural else None, config.judge.model]
    targets: dict[str, ModelTarget] = {}
    for spec in specs:
        if spec and spec not in targets:
            targets[spec] = model_target(config, spec)
    return targets
