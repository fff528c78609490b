"""What every entry point checks and sets before a flow starts: the hub models a run loads,
the input preflight (everything that can be wrong, found before a model loads) and the
process environment Prefect starts in."""

from __future__ import annotations

import os
from pathlib import Path

from sago_core.artifacts.layout import default_prefect_home
from sago_core.config import RunConfig


def hub_models(config: RunConfig) -> list[str]:
    """The hub ids a run loads weights from (models, tools, the BERTScore scorer); resolving
    them also refuses a local path that does not exist."""
    from sago_core.backends.model_source import (
        parse_model_spec,
        resolve_bertscore_model,
        resolve_local_model,
    )
    from sago_core.registry.backends import backend_spec

    found = []
    for model in run_model_specs(config):
        spec = parse_model_spec(model)
        if backend_spec(spec.backend).weights == "local":
            local = resolve_local_model(spec.model_id)
            if local.kind == "hub":
                found.append(local.location)
    scorer = resolve_bertscore_model(config.bertscore.model)
    if not Path(scorer).expanduser().is_dir():
        found.append(scorer)
    return list(dict.fromkeys(found))


def run_model_specs(config: RunConfig) -> list[str]:
    """Every ``BACKEND:ID`` a run uses: the evaluated models, the rewriter, the translator,
    the judge."""
    structural, translation = config.variants.structural, config.variants.translation
    tools = [
        structural.rewriter if structural else None,
        translation.translator if translation else None,
        config.register_judge.model,
        config.refusal.judge,
    ]
    return [*config.models, *(t for t in tools if t)]


def preflight(config: RunConfig) -> None:
    """Everything that can be wrong with the inputs, found before a model loads."""
    from sago_core.backends.api import api_key_from_environment
    from sago_core.backends.hub_check import require_hub_model
    from sago_core.backends.model_source import parse_model_spec
    from sago_core.data.loading import load_run_prompts
    from sago_core.registry.backends import backend_spec

    for model in run_model_specs(config):
        if backend_spec(parse_model_spec(model).backend).is_api:
            api_key_from_environment(config.api)  # a named key variable must be set
    for model_id in hub_models(config):  # cached, or confirmed by the hub, before any work
        require_hub_model(model_id)
    load_run_prompts(config)
    if config.runs_store:  # bucket, credentials and conditional writes, before any model
        from sago_core.storage.location import parse_store_url
        from sago_core.storage.preflight import check_store

        check_store(parse_store_url(config.runs_store))


def configure_environment(config: RunConfig) -> None:
    """Prefect and hub settings; must run before prefect is imported."""
    home = Path(
        os.environ.get("PREFECT_HOME")
        or config.prefect_home
        or default_prefect_home(config.runs_dir)
    ).resolve()
    home.mkdir(parents=True, exist_ok=True)  # Prefect does not create missing parents
    os.environ["PREFECT_HOME"] = str(home)
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # sago's own loggers (the vLLM worker's forwarded lines among them) reach the UI.
    os.environ.setdefault("PREFECT_LOGGING_EXTRA_LOGGERS", "sago")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
