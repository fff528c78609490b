"""The ``sago score`` flow: generations made elsewhere -> the stages after generation,
exactly as ``sago run`` runs them (``score_model`` per model, then ``finish_run``), into the
same artifacts in ``runs/<run_id>/``, cached and resumable the same way.

Without a scoring model Act, Prob and Ent are missing ("external generations: no model
given"); with one, its teacher-forced pass scores each base response (its token ids if the
file gives them, else its text tokenised once) under the base and variant prompts.
"""

from __future__ import annotations

import hashlib
from typing import Any

import polars as pl
from prefect import flow, task

from sago.flows.evaluate import finish_run, score_model
from sago.flows.runtime.object_store import attach_runs_store
from sago.flows.runtime.stage_runner import StageRunner
from sago.tasks.external import (
    external_generations_task,
    external_prompts_task,
    external_variants_task,
    read_external_task,
    read_notes,
    unmeasured_analysis_task,
)
from sago.tasks.models import analyse_task
from sago_core.artifacts.layout import RunLayout
from sago_core.artifacts.store import sha256_of
from sago_core.backends.target import ModelTarget, RunTargets, model_target
from sago_core.config import RunConfig, build_config
from sago_core.external.options import ExternalSource


def score_run_id(config: RunConfig, source: ExternalSource) -> str:
    """The same file, options and settings always land in the same folder (a rerun resumes)."""
    if config.run_id:
        return config.run_id
    options = source.model_dump(mode="json", exclude={"path"})
    digest = hashlib.sha256(
        f"{sha256_of(source.path)}|{sorted(options.items())}|{config.result_hash()}".encode()
    ).hexdigest()
    return f"score-{digest[:12]}"


@task(name="resolve-score-inputs", task_run_name="resolve-score-inputs")
def resolve_score_inputs_task(config: RunConfig, source: ExternalSource) -> dict[str, Any]:
    """The scoring model's target (if any) and the file's digest, before anything runs."""
    target = model_target(config, source.model) if source.model else None
    models = {target.spec: target} if target else {}
    judge_spec = config.register_judge.model
    known = models.get(judge_spec) if judge_spec else None
    judge = (
        model_target(config, judge_spec, known.source if known else None) if judge_spec else None
    )
    return {
        "targets": RunTargets(models=models, judge=judge).model_dump(mode="json"),
        "models": {spec: t.describe() for spec, t in models.items()},
        "rewriter": None,
        "judge": judge.describe() if judge else None,
        "data_digest": sha256_of(source.path),
        "external": {"file": str(source.path), **source.model_dump(mode="json", exclude={"path"})},
    }


@flow(name="sago-score", flow_run_name="score-{source.path.name}", log_prints=True)
def score(
    source: ExternalSource,
    config: RunConfig | None = None,
    preset: str = "demo",
    overrides: dict[str, Any] | None = None,
) -> str:
    """Score ``source``. ``config``, or (the deployment's plain parameters) ``preset`` with
    ``overrides`` (bertscore, statistics, runs_dir, ...)."""
    if config is None:
        values = dict(overrides or {})
        if source.model:
            values["models"] = [source.model]
        config = build_config(preset, values, source="deployment parameters")
    attach_runs_store(config.runs_store, config.runs_dir)  # a runs folder on a store
    layout = RunLayout.of(config.runs_dir, score_run_id(config, source))
    stage = StageRunner(layout, storage_name=f"sago-results-{layout.run_dir.name}")
    inputs = resolve_score_inputs_task(config, source)
    targets = RunTargets.model_validate(inputs["targets"])
    target: ModelTarget | None = next(iter(targets.models.values()), None)
    out = str(layout.run_dir)
    cache_dir, ledger_file = str(layout.cache.root), str(layout.ledger)
    rows = stage(
        read_external_task, source=source, source_path=str(source.path), out_dir=str(layout.stages)
    )
    inputs["external"]["notes"] = read_notes(rows)
    prompts = stage(external_prompts_task, rows_path=rows, out_dir=out)
    variants = stage(external_variants_task, rows_path=rows, out_dir=out)
    models = pl.scan_parquet(rows).select(pl.col("model").unique(maintain_order=True))
    per_model = []
    for model in models.collect()["model"].to_list():
        where = str(layout.model_dir(model))
        generations = stage(
            external_generations_task,
            run_tags=[f"model:{model}"],
            model=model,
            rows_path=rows,
            target=target,
            out_dir=where,
            cache_dir=cache_dir,
            ledger_file=ledger_file,
        )
        if target is None:
            analysis = stage(
                unmeasured_analysis_task, model=model, generations_path=generations, out_dir=where
            )
        else:
            analysis = stage(
                analyse_task,
                run_tags=[f"model:{model}"],
                model=model,
                shard="external",
                target=target,
                generations_path=generations,
                settings=config.analysis,
                out_dir=where,
                cache_dir=cache_dir,
                ledger_file=ledger_file,
            )
        per_model.append(score_model(stage, config, model, generations, analysis, targets.judge))
    finish_run(stage, config, inputs, prompts, variants, per_model)
    return out
