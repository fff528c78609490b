"""The study flow (``sago study``): evaluate every checkpoint of every series on the
ID and OOD datasets, then ask whether one OOD dataset's scores predict another's."""

from __future__ import annotations

import json
from pathlib import Path

from prefect import flow

from sago.flows.evaluate import evaluate
from sago.flows.runtime.object_store import attach_runs_store
from sago.flows.runtime.stage_runner import StageRunner
from sago.tasks.provenance import targets_of
from sago.tasks.study import (
    checkpoint_scores_task,
    checkpoint_series_task,
    partial_correlations_task,
    reference_likelihood_task,
    render_study_task,
    sign_agreement_task,
)
from sago_core.artifacts.layout import GENERATIONS_FILE, PROMPTS_FILE, SUMMARY_FILE, RunLayout
from sago_core.study.config import StudyConfig
from sago_core.study.design import design_lines


@flow(name="sago-study", flow_run_name="study", log_prints=True)
def study(config: StudyConfig) -> str:
    evaluation_config = config.evaluation
    attach_runs_store(evaluation_config.runs_store, evaluation_config.runs_dir)
    layout = RunLayout(config.run_dir())
    run_dir = layout.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    for line in design_lines(config.design_check()):  # before any checkpoint is evaluated
        print(line)
    # Before any evaluation: build missing series, refuse training rows that are evaluated.
    split = checkpoint_series_task(config, out_dir=str(run_dir))
    evaluation = Path(evaluate(config.evaluation))
    stage = StageRunner(layout, storage_name=f"sago-results-{run_dir.name}")
    manifest = json.loads(RunLayout(evaluation).manifest.read_text(encoding="utf-8"))
    targets = targets_of(manifest).models  # the models the evaluation resolved
    prompts = str(evaluation / PROMPTS_FILE)
    likelihoods = [
        stage(
            reference_likelihood_task,
            model=model,
            target=targets[model],
            prompts_path=prompts,
            settings=config.evaluation.analysis,
            out_dir=str(layout.model_dir(model)),
            cache_dir=str(layout.cache.root),
        )
        for model in config.evaluation.models
    ]
    scores = stage(
        checkpoint_scores_task,
        checkpoints=config.checkpoints(),
        prompts_path=prompts,
        generations_path=str(evaluation / GENERATIONS_FILE),
        summary_path=str(evaluation / SUMMARY_FILE),
        likelihood_paths=likelihoods,
        out_dir=str(run_dir),
    )
    partial = stage(
        partial_correlations_task,
        scores_path=scores,
        in_distribution=config.in_distribution,
        out_of_distribution=list(config.out_of_distribution),
        statistics=config.statistics,
        out_dir=str(run_dir),
    )
    agreement = stage(sign_agreement_task, partial_path=partial, out_dir=str(run_dir))
    stage(
        render_study_task,
        scores_path=scores,
        partial_path=partial,
        agreement_path=agreement,
        split_path=split,
        settings=config.model_dump(mode="json", exclude={"evaluation"}),
        out_dir=str(run_dir),
    )
    return str(run_dir)
