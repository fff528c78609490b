"""Where a run's files go and which settings each backend's tasks get."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from sago_core.backends.model_source import parse_model_spec
from sago_core.config import RunConfig


def model_slug(model: str) -> str:
    """A readable folder name per model spec; the hash keeps "a/b" and "a_b" apart."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("_")[:60]
    return f"{readable}-{hashlib.sha256(model.encode()).hexdigest()[:8]}"


RUN_CONFIG = "run_config.json"


def run_dir_for(config: RunConfig) -> Path:
    return (config.runs_dir / config.resolved_run_id()).resolve()


def backend_options(config: RunConfig, run_dir: Path, model: str) -> dict[str, Any]:
    """Per-backend settings for the model tasks (only those of the model's own backend, so
    changing vLLM options never invalidates transformers results)."""
    backend = parse_model_spec(model).backend
    if backend == "litellm":
        return api_options(config, run_dir)
    trusted = {"trust_remote_code": True} if model in config.trust_remote_code else {}
    if backend == "vllm":
        cache = str(config.runs_dir.resolve() / ".cache")
        return {"vllm": config.vllm, "cache_dir": cache, **trusted}
    return trusted


def api_options(config: RunConfig, run_dir: Path) -> dict[str, Any]:
    """API settings (cache key), the answer cache shared by runs, the run's spending ledger."""
    return {
        "api": config.api,
        "cache_dir": str(config.runs_dir.resolve() / ".cache"),
        "ledger_file": str(run_dir / "api_ledger.jsonl"),
    }
