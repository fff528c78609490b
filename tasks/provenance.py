"""Tasks that are never cached: resolve inputs' identities, write the run manifest."""

from __future__ import annotations

import importlib.metadata
import json
import platform
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prefect import task

from sago_core.artifacts.integrity import integrity_counts
from sago_core.artifacts.layout import MANIFEST_FILE, RunLayout
from sago_core.artifacts.store import write_json
from sago_core.backends.target import RunTargets, run_targets
from sago_core.config import RunConfig
from sago_core.data.loading import source_digest
from sago_core.registry import plugins
from sago_core.storage.attached import ensure_local

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
    """Every model's target (evaluated models, rewriter, judge) and the data digest; fails
    here, before any model is loaded. Targets travel as JSON (``ModelTarget`` validates
    them back): a flow's inputs are never pickled."""
    targets = run_targets(config)
    return {
        "targets": targets.model_dump(mode="json"),
        "models": {spec: target.describe() for spec, target in targets.models.items()},
        "rewriter": targets.rewriter.describe() if targets.rewriter else None,
        "translator": targets.translator.describe() if targets.translator else None,
        "judge": targets.judge.describe() if targets.judge else None,
        "data_digest": source_digest(config.datasets, config.data_dir),
        "started_at": datetime.now(UTC).isoformat(),
    }


def targets_of(inputs: dict[str, Any]) -> RunTargets:
    """The run's targets from ``resolve-inputs``' result or the run's manifest."""
    return RunTargets.model_validate(inputs["targets"])


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
        # a run on a store is named by its URL, not by this machine's scratch folder
        "config": config.model_dump(
            mode="json", by_alias=True, exclude={"runs_dir"} if config.runs_store else None
        ),
        "config_hash": config.result_hash(),
        "seed": config.seed,
        "models": inputs["models"],
        "rewriter": inputs["rewriter"],
        "judge": inputs.get("judge"),
        **({"translator": inputs["translator"]} if inputs.get("translator") else {}),
        "packages": {**package_versions(), **plugins.distributions()},
        # cache hits whose artifact failed its sha256 and were recomputed, by reason
        "integrity": integrity_counts(RunLayout(run_dir)),
        # sago score: the external file, how it was read, and the reader's counts
        **({"external": inputs["external"]} if "external" in inputs else {}),
    }


def first_started(config: RunConfig, manifest: Path, inputs: dict[str, Any]) -> str:
    """When this run first started: a rerun of the same config keeps the time its manifest
    holds (the results site orders releases by it; ``written_at`` moves on every rerun)."""
    if ensure_local(manifest):
        earlier = json.loads(manifest.read_text(encoding="utf-8"))
        if earlier.get("config_hash") == config.result_hash() and earlier.get("started_at"):
            return str(earlier["started_at"])
    return str(inputs.get("started_at") or datetime.now(UTC).isoformat())


@task(name="write-manifest", task_run_name="write-manifest")
def write_manifest_task(
    config: RunConfig,
    inputs: dict[str, Any],
    stages: list[dict[str, Any]],
    run_dir: str,
    store: dict[str, Any] | None = None,
) -> str:
    """``store``: the object store the run lives on and the requests this process made."""
    manifest = {
        **provenance(config, inputs, Path(run_dir)),
        "started_at": first_started(config, Path(run_dir) / MANIFEST_FILE, inputs),
        "written_at": datetime.now(UTC).isoformat(),
        "data_digest": inputs["data_digest"],
        "python": platform.python_version(),
        "platform": platform.platform(),
        "stages": stages,
        # Read back by the consistency study, so it scores the very models evaluated.
        "targets": inputs["targets"],
        **({"store": store} if store else {}),
    }
    return str(write_json(manifest, Path(run_dir) / MANIFEST_FILE))
