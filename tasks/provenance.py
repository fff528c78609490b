"""Tasks that are never cached: resolve inputs' identities, write the run manifest."""

from __future__ import annotations

import importlib.metadata
import platform
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prefect import task

from sago_core.artifacts.store import write_json
from sago_core.backends.factory import check_backend_available
from sago_core.backends.model_source import parse_model_spec, resolve_local_model
from sago_core.config import RunConfig
from sago_core.data.loading import source_digest

PACKAGES = (
    "sago",
    "prefect",
    "polars",
    "pyarrow",
    "numpy",
    "scipy",
    "sacrebleu",
    "bert-score",
    "torch",
    "transformers",
    "gguf",
)


@task(name="resolve-inputs", task_run_name="resolve-inputs")
def resolve_inputs_task(config: RunConfig) -> dict[str, Any]:
    """Model identities and the data digest; fails here, before any model is loaded."""
    models = {model: _describe_model(model, config) for model in config.models}
    structural = config.variants.structural
    rewriter = _describe_model(structural.rewriter, config) if structural else None
    return {
        "models": models,
        "rewriter": rewriter,
        "rewriter_identity": rewriter["identity"] if rewriter else None,
        "data_digest": source_digest(config.datasets, config.data_dir),
    }


def _describe_model(model: str, config: RunConfig) -> dict[str, Any]:
    check_backend_available(model)
    spec = parse_model_spec(model)
    if spec.backend == "litellm":
        endpoint = config.api.base_url or "provider-default"
        return {
            "spec": model,
            "identity": f"api:{spec.model_id}@{endpoint}",
            "kind": "api",
            "location": endpoint,
            "gguf_file": None,
        }
    source = resolve_local_model(spec.model_id)
    return {
        "spec": model,
        "identity": source.identity,
        "kind": source.kind,
        "location": source.location,
        "gguf_file": source.gguf_file,
    }


def package_versions() -> dict[str, str]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def provenance(config: RunConfig, inputs: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """How results were made, stable across reruns (the report's cache key includes it)."""
    return {
        "run_id": run_dir.name,
        "config": config.model_dump(mode="json", by_alias=True),
        "config_hash": config.result_hash(),
        "seed": config.seed,
        "models": inputs["models"],
        "rewriter": inputs["rewriter"],
        "packages": package_versions(),
    }


@task(name="write-manifest", task_run_name="write-manifest")
def write_manifest_task(
    config: RunConfig, inputs: dict[str, Any], stages: list[dict[str, Any]], run_dir: str
) -> str:
    manifest = {
        **provenance(config, inputs, Path(run_dir)),
        "written_at": datetime.now(UTC).isoformat(),
        "data_digest": inputs["data_digest"],
        "python": platform.python_version(),
        "platform": platform.platform(),
        "stages": stages,
    }
    return str(write_json(manifest, Path(run_dir) / "manifest.json"))
