"""The SAGO evaluation flow: prompts -> variants -> generations -> analysis -> pair scores
-> mirroring -> deltas -> per-prompt scores -> summary. Each line is one cached stage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
from prefect import flow

from sago.flows.budgeted import budgeted_models
from sago.flows.locate import locate_run, patch_model
from sago.flows.runtime.dispatch import dispatch_shards, shard_workers
from sago.flows.runtime.monitor import RunMonitor
from sago.flows.runtime.object_store import attach_runs_store
from sago.flows.runtime.stage_runner import StageRunner
from sago.flows.shard import shard_work
from sago.tasks.budget import budget_scores_task, budget_summary_task
from sago.tasks.insights import (
    axis_pca_task,
    axis_structure_task,
    build_instances_task,
    tail_statistics_task,
)
from sago.tasks.metrics import (
    assemble_task,
    compute_deltas_task,
    render_summary_task,
    score_pairs_task,
    score_prompts_task,
    summarize_task,
)
from sago.tasks.mirroring import detect_mirroring_task
from sago.tasks.peer_metrics import peer_metrics_task
from sago.tasks.prepare import (
    build_variants_task,
    filter_variants_task,
    load_prompts_task,
    plan_shards_task,
    rewrite_structural_task,
    translate_prompts_task,
)
from sago.tasks.provenance import provenance, resolve_inputs_task, targets_of, write_manifest_task
from sago.tasks.refusal import all_refusals_judged, refusal_judge, refusal_task
from sago.tasks.report import render_report_task
from sago.tasks.sampling_statistics import (
    excess_deltas_task,
    sampling_tests_task,
    variance_components_task,
)
from sago.tasks.tracking import track_run_task
from sago_core.artifacts.layout import RunLayout
from sago_core.artifacts.store import write_json
from sago_core.axes.judge import JUDGE_CALL_FAILED
from sago_core.backends.target import ModelTarget
from sago_core.config import RunConfig
from sago_core.errors import ConfigError
from sago_core.scoring.encoder import settings_encoder
from sago_core.stages.shards import Shard, read_shards
from sago_core.sweep import is_sweep


def all_judged(mirroring_path: str) -> bool:
    """Mirroring is committed only when no judge call failed (verdicts are cached)."""
    failed = pl.col("missing_reason").str.starts_with(JUDGE_CALL_FAILED)
    return pl.scan_parquet(mirroring_path).filter(failed).collect().height == 0


def beyond_the_mean(
    stage: StageRunner,
    deltas: str,
    generations: str,
    prompts: str,
    scores: str,
    out: str,
    sampling_tests: list[str] | None = None,
) -> tuple[str, str, str, str]:
    """Instances, tail statistics, axis structure and its PCA: their paths; at
    K > 1 the instances read every sample from the models' ``sampling_tests``."""
    sampled: dict[str, Any] = {"sampling_tests_paths": sampling_tests} if sampling_tests else {}
    instances = stage(
        build_instances_task,
        deltas_path=deltas,
        generations_path=generations,
        prompts_path=prompts,
        out_dir=out,
        **sampled,
    )
    return (
        instances,
        stage(tail_statistics_task, instances_path=instances, out_dir=out),
        stage(axis_structure_task, scores_path=scores, out_dir=out),
        stage(axis_pca_task, scores_path=scores, out_dir=out),
    )


def layout_of(config: RunConfig) -> RunLayout:
    return RunLayout.of(config.runs_dir, config.resolved_run_id())


def evaluate_model(
    stage: StageRunner,
    config: RunConfig,
    target: ModelTarget,
    judge: ModelTarget | None,
    shards: list[Shard],
    monitor: RunMonitor,
    prompts: str | None = None,
    where: Path | None = None,
) -> dict[str, str]:
    """One model's shards, assembled, then its per-model stages; at K > 1 samples
    (``generation.samples``, needs ``prompts``) its deltas are the excesses'. ``where``:
    the folder of its assembled artifacts (default the model's folder; a budgeted run's
    round has its own)."""
    layout, model = stage.layout, target.spec
    out = where or layout.model_dir(model)
    dispatch_shards(stage, config, target, shards, monitor.shard_finished, shard_work())

    def assemble(name: str) -> str:
        return stage(
            assemble_task,
            run_tags=[f"model:{model}"],
            name=name,
            schema_name=name.upper(),
            part_paths=[str(layout.shard_artifact(model, s.label, name)) for s in shards],
            out_dir=str(out),
        )

    generations, analysis = assemble("generations"), assemble("analysis")
    matrix = {"posix_matrix": assemble("posix_matrix")} if config.posix_matrix else {}
    scored = score_model(stage, config, model, generations, analysis, judge, out)
    if config.generation.draws_samples and prompts is not None:
        samples = {"samples": assemble("samples"), "sample_analysis": assemble("sample_analysis")}
        scored |= sample_model(stage, config, model, scored, samples, prompts, judge, out)
    return {**scored, **matrix, **patch_model(stage, config, target, generations, analysis)}


def sample_model(
    stage: StageRunner,
    config: RunConfig,
    model: str,
    scored: dict[str, str],
    samples: dict[str, str],
    prompts: str,
    judge: ModelTarget | None,
    where: Path,
) -> dict[str, str]:
    """K > 1: the sampling tests, and the deltas from their excesses, which
    replace the model's deltas of sample 0 (whose Act rows they keep), in ``where``."""
    out = str(where)
    tests = stage(
        sampling_tests_task,
        model=model,
        samples_path=samples["samples"],
        sample_analysis_path=samples["sample_analysis"],
        prompts_path=prompts,
        bertscore=config.bertscore,
        judged_families=["register"] if judge is not None else [],
        out_dir=out,
    )
    deltas = stage(
        excess_deltas_task,
        model=model,
        sampling_tests_path=tests,
        deltas_path=scored["deltas"],
        out_dir=out,
    )
    return {**samples, "sampling_tests": tests, "sample_deltas": scored["deltas"], "deltas": deltas}


def score_model(
    stage: StageRunner,
    config: RunConfig,
    model: str,
    generations: str,
    analysis: str,
    judge: ModelTarget | None,
    where: Path | None = None,
) -> dict[str, str]:
    """The per-model stages after generation (pair scores, mirroring, deltas); ``sago run``
    and ``sago score`` share them. Returns the model's artifact paths by name."""
    layout = stage.layout
    out = str(where or layout.model_dir(model))
    pairs = stage(
        score_pairs_task,
        model=model,
        generations_path=generations,
        bertscore=config.bertscore,
        out_dir=out,
        cache_dir=str(layout.cache.root),
    )
    mirroring = stage(
        detect_mirroring_task,
        commit_if=all_judged,
        model=model,
        generations_path=generations,
        out_dir=out,
        judge=judge,
        judge_batch_size=config.register_judge.batch_size,
        cache_dir=str(layout.cache.root),
        ledger_file=str(layout.ledger),
    )
    deltas = stage(
        compute_deltas_task,
        model=model,
        generations_path=generations,
        analysis_path=analysis,
        pairs_path=pairs,
        mirroring_path=mirroring,
        out_dir=out,
    )
    return {"generations": generations, "analysis": analysis, "deltas": deltas}


@flow(name="sago-evaluate", flow_run_name="evaluate-{config.preset}", log_prints=True)
def evaluate(config: RunConfig) -> str:
    if is_sweep(config):  # a deployment's or a watch's parameters, not through `sago run`
        raise ConfigError(
            "generation.temperatures makes a temperature sweep, one run per temperature: "
            "run it with `sago run`, or give this flow one temperature"
        )
    attach_runs_store(config.runs_store, config.runs_dir)  # a runs folder on a store
    layout = layout_of(config)
    run_dir = layout.run_dir
    stage = StageRunner(layout, storage_name=f"sago-results-{config.resolved_run_id()}")
    # What `sago resume` reads back.
    write_json(config.model_dump(mode="json", by_alias=True), layout.run_config)
    out = str(run_dir)
    inputs = resolve_inputs_task(config)
    targets = targets_of(inputs)
    structural = config.variants.structural
    prompts = stage(
        load_prompts_task, config=config, prompt_source_digest=inputs["data_digest"], out_dir=out
    )
    candidates = stage(
        build_variants_task,
        prompts_path=prompts,
        grid=config.variants,
        seed=config.seed,
        out_dir=str(layout.stages),
    )
    rewrites = stage(
        rewrite_structural_task,
        prompts_path=prompts,
        grid=structural,
        rewriter=targets.rewriter,
        seed=config.seed,
        cache_dir=str(layout.cache.root),
        out_dir=str(layout.stages),
        ledger_file=str(layout.ledger),
    )
    translations = stage(
        translate_prompts_task,
        prompts_path=prompts,
        settings=config.variants.translation,
        translator=targets.translator,
        bertscore=config.bertscore,
        seed=config.seed,
        cache_dir=str(layout.cache.root),
        out_dir=str(layout.stages),
        ledger_file=str(layout.ledger),
    )
    variants = stage(
        filter_variants_task,
        candidates_paths=[candidates, rewrites, translations],
        prompts_path=prompts,
        bertscore=config.bertscore,
        out_dir=out,
        cache_dir=str(layout.cache.root),
    )
    if config.budget is not None:  # the grid's cells in rounds, until the verdicts are known
        per_model, budget, monitor = budgeted_models(
            stage,
            config,
            list(targets.models.values()),
            targets.judge,
            {"prompts": prompts, "variants": variants},
            evaluate_model,
            sample_run,
        )
    else:
        plan = stage(
            plan_shards_task,
            prompts_path=prompts,
            variants_path=variants,
            shard_size=config.orchestration.shard_size,
            out_dir=str(layout.shards),
            workers=shard_workers(config.orchestration),
        )
        shards = read_shards(plan)
        monitor = RunMonitor(config.resolved_run_id(), len(shards) * len(config.models))
        per_model = [
            evaluate_model(stage, config, target, targets.judge, shards, monitor, prompts)
            for target in targets.models.values()
        ]
        budget = {}
    summary, report = finish_run(stage, config, inputs, prompts, variants, per_model, budget)
    monitor.finish(summary, Path(report))
    return out


def model_paths(per_model: list[dict[str, str]], name: str, argument: str) -> dict[str, Any]:
    """A stage's ``argument`` naming every model's ``name`` artifact (at K > 1 the refusal
    stage's samples and the peer indices' sample analyses; the POSIX matrix when it is on);
    none when no model has one, so the stage's cache key stays as it was."""
    paths = [m[name] for m in per_model if name in m]
    return {argument: paths} if paths else {}


def budget_summary(budget: dict[str, str] | None) -> dict[str, Any]:
    """A budgeted run: summary.md's argument naming its budget record; none for a
    full-grid run, so its cache key stays."""
    return {"budget_path": budget["budget_path"]} if budget else {}


def budget_report(budget: dict[str, str] | None) -> dict[str, Any]:
    """A budgeted run: the report's arguments naming its budget record and estimates; none
    for a full-grid run, so its cache key stays."""
    names = ("budget_path", "budget_estimates_path")
    return {name: budget[name] for name in names} if budget else {}


def sample_run(stage: StageRunner, per_model: list[dict[str, str]]) -> dict[str, Any]:
    """K > 1: the models' sampling tests in one run-level file and the variance components.
    Their paths by the report's argument names; none at K = 1."""
    parts = [m["sampling_tests"] for m in per_model if "sampling_tests" in m]
    if not parts:
        return {}
    out = str(stage.layout.run_dir)
    tests = stage(
        assemble_task,
        name="sampling_tests",
        schema_name="SAMPLING_TESTS",
        part_paths=parts,
        out_dir=out,
    )
    components = stage(variance_components_task, sampling_tests_path=tests, out_dir=out)
    return {"sampling_tests_path": tests, "variance_components_path": components}


def finish_run(
    stage: StageRunner,
    config: RunConfig,
    inputs: dict[str, Any],
    prompts: str,
    variants: str,
    per_model: list[dict[str, str]],
    budget: dict[str, str] | None = None,
) -> tuple[str, str]:
    """The run-level tail that ``sago run`` and ``sago score`` share: assemble the models'
    generations and deltas, then scores -> summary -> summary.md -> report -> manifest.
    ``per_model``: what ``score_model`` returned per model; ``budget``: a budgeted run's
    artifacts (flows/budgeted.py), whose per-prompt scores are the design's. Returns
    (summary, report)."""
    run_dir = stage.layout.run_dir
    out = str(run_dir)
    generations = stage(
        assemble_task,
        name="generations",
        schema_name="GENERATIONS",
        part_paths=[m["generations"] for m in per_model],
        out_dir=out,
    )
    refusal = stage(
        refusal_task,
        commit_if=all_refusals_judged,
        prompts_path=prompts,
        generations_path=generations,
        out_dir=out,
        **model_paths(per_model, "samples", "samples_paths"),
        **refusal_judge(config.refusal, targets_of(inputs).refusal_judge, stage.layout),
    )
    deltas = stage(
        assemble_task,
        name="deltas",
        schema_name="DELTAS",
        part_paths=[m["deltas"] for m in per_model],
        out_dir=out,
    )
    scores = (
        stage(
            budget_scores_task,
            deltas_path=deltas,
            budget_prompts_path=budget["budget_prompts_path"],
            out_dir=out,
        )
        if budget
        else stage(score_prompts_task, deltas_path=deltas, out_dir=out)
    )
    summary = (
        stage(
            budget_summary_task,
            scores_path=scores,
            budget_path=budget["budget_path"],
            budget_estimates_path=budget["budget_estimates_path"],
            test_against=config.statistics.test_against,
            out_dir=out,
        )
        if budget
        else stage(
            summarize_task,
            scores_path=scores,
            test_against=config.statistics.test_against,
            out_dir=out,
        )
    )
    stage(
        render_summary_task,
        summary_path=summary,
        variants_path=variants,
        out_dir=out,
        generations_path=generations,
        encoder=settings_encoder(config.bertscore).label,
        **budget_summary(budget),
    )
    instances, tails, axis_structure, axis_pca = beyond_the_mean(
        stage,
        deltas,
        generations,
        prompts,
        scores,
        out,
        [m["sampling_tests"] for m in per_model if "sampling_tests" in m],
    )
    peer = stage(
        peer_metrics_task,
        instances_path=instances,
        deltas_path=deltas,
        analysis_paths=[m["analysis"] for m in per_model],
        out_dir=out,
        **model_paths(per_model, "sample_analysis", "sample_analysis_paths"),
        **model_paths(per_model, "posix_matrix", "posix_matrix_paths"),
    )
    located = locate_run(stage, config, generations, per_model)
    sampled = sample_run(stage, per_model)
    report = stage(
        render_report_task,
        summary_path=summary,
        scores_path=scores,
        deltas_path=deltas,
        variants_path=variants,
        prompts_path=prompts,
        generations_path=generations,
        provenance=provenance(config, inputs, run_dir),
        out_dir=out,
        analysis_paths=[m["analysis"] for m in per_model],
        instances_path=instances,
        tails_path=tails,
        axis_structure_path=axis_structure,
        axis_pca_path=axis_pca,
        layer_profiles_path=located["layer_profiles_path"],
        patching_path=located["patching_path"],
        peer_metrics_path=peer,
        refusal_path=refusal,
        **sampled,
        **budget_report(budget),
    )
    write_manifest_task(config, inputs, stage.records, out, stage.store_summary())
    if config.tracking is not None:  # after the manifest: trackers copy the finished run
        track_run_task(out, config.tracking)
    return summary, report
