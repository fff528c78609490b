"""The `sago-shard` flow: a group of one model's shards served in one worker process (its
engine built once), and one shard's generation and scoring pass. Where each group runs (this
process, a local device worker, a deployment run per device queue) is
``flows.runtime.dispatch``."""

from __future__ import annotations

import os
import socket
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl
from prefect import flow

from sago.flows.runtime.dispatch import ShardWork, flow_entrypoint
from sago.flows.runtime.object_store import attach_runs_store
from sago.flows.runtime.stage_runner import StageRunner
from sago.tasks.models import analyse_task, generate_task
from sago.tasks.posix_matrix import posix_matrix_task
from sago.tasks.sample_answers import analyse_samples_task, sample_task
from sago_core.artifacts.layout import SHARD_WORKER_FILE, RunLayout
from sago_core.artifacts.store import write_json
from sago_core.backends.target import ModelTarget, relocated
from sago_core.config import RunConfig
from sago_core.stages.shards import Shard


def all_answered(generations_path: str) -> bool:
    """A shard is committed only when every request got a valid answer (generations, or
    every sample of samples.parquet)."""
    failures = pl.scan_parquet(generations_path).select(pl.col("failure_reason").count())
    return failures.collect().item() == 0


def shard_places(
    layout: RunLayout, model: str, shard: Shard
) -> tuple[str, dict[str, Any], list[str]]:
    """A shard's folder, the cache and ledger its tasks share, and its task-run tags: none.

    Its task runs are named for the model and the shard instead. Prefect treats every tag as
    a possible concurrency limit: a task run with tags first asks the server for their limits
    (a thread and a client per distinct set of tags, the answer kept 5 s), which cost a
    shard about a second on loaded cores before its first task began; one without tags asks
    nothing."""
    places: dict[str, Any] = {
        "cache_dir": str(layout.cache.root),
        "ledger_file": str(layout.ledger),
    }
    labels: list[str] = []
    return str(layout.shard_dir(model, shard.label)), places, labels


def _shard_arguments(stage: StageRunner, target: ModelTarget, shard: Shard) -> dict[str, Any]:
    """What every task of a shard is given: its tags, model, shard, engine, folder, cache
    and ledger."""
    where, places, labels = shard_places(stage.layout, target.spec, shard)
    return {
        "run_tags": labels,
        "model": target.spec,
        "shard": shard.label,
        "target": target,
        "out_dir": where,
        **places,
    }


def run_shard(
    stage: StageRunner, config: RunConfig, target: ModelTarget, shard: Shard
) -> tuple[str, str, bool]:
    """Generation and the scoring pass of one shard, then at K > 1 samples its samples and
    their scoring pass (``run_samples``); (generations, analysis, cached)."""
    shard_arguments = _shard_arguments(stage, target, shard)
    generated = stage(
        generate_task,
        commit_if=all_answered,
        prompts_path=shard.prompts_path,
        variants_path=shard.variants_path,
        # sample 0 does not depend on K: a run at K > 1 shares it with the run at K = 1
        settings=config.generation.model_copy(update={"samples": 1}),
        **shard_arguments,
    )
    cached = stage.last_cached
    analysed = stage(
        analyse_task,
        generations_path=generated,
        settings=config.analysis.scoring_pass(),
        **shard_arguments,
    )
    cached = cached and stage.last_cached
    if config.posix_matrix is not None:  # POSIX's full matrix (peer metrics); off by default
        stage(
            posix_matrix_task,
            generations_path=generated,
            settings=config.posix_matrix,
            scoring=config.analysis.scoring_pass(),
            seed=config.seed,
            **shard_arguments,
        )
        cached = cached and stage.last_cached
    if config.generation.draws_samples:
        cached = run_samples(stage, config, target, shard, generated, analysed) and cached
    return generated, analysed, cached


def run_samples(
    stage: StageRunner,
    config: RunConfig,
    target: ModelTarget,
    shard: Shard,
    generations: str,
    analysis: str,
) -> bool:
    """Samples 1..K-1 of every prompt text of one shard (samples.parquet) and each base
    sample teacher-forced under every prompt text (sample_analysis.parquet), in the shard's
    folder (``RunLayout.shard_artifact(model, shard, "samples")``); True when both were
    cached."""
    shard_arguments = _shard_arguments(stage, target, shard)
    sampled = stage(
        sample_task,
        commit_if=all_answered,
        generations_path=generations,
        settings=config.generation,
        **shard_arguments,
    )
    cached = stage.last_cached
    stage(
        analyse_samples_task,
        samples_path=sampled,
        analysis_path=analysis,
        settings=config.analysis.scoring_pass(),
        **shard_arguments,
    )
    return cached and stage.last_cached


@flow(
    name="sago-shard",
    flow_run_name="shard-{model}-{device_queue}",
    log_prints=True,
)
def shard_flow(
    config: RunConfig,
    model: str,
    target: ModelTarget,
    shards: list[dict],
    run_dir: str,
    device_queue: str = "local",
) -> list[str]:
    """Serve a group of shards of ``model`` in this worker process (its devices come from
    the worker's CUDA_VISIBLE_DEVICES, set before anything touched CUDA)."""
    # On an object store this machine works in its own scratch folder: paths the
    # orchestrator gave are moved below it (by run id), inputs are fetched as they are read.
    attach_runs_store(config.runs_store, config.runs_dir)
    layout = RunLayout.of(config.runs_dir, Path(run_dir).name)
    target = relocated(target)  # a worker on another machine has the weights elsewhere
    stage = StageRunner(layout, storage_name=f"sago-results-{layout.run_dir.name}")
    done = []
    for raw in shards:
        shard = localised(Shard(**raw), layout)
        started = time.time()
        generated, _, cached = run_shard(stage, config, target, shard)
        write_json(
            {
                # when this worker began and finished the shard (UTC epoch seconds)
                "started_at": round(started, 3),
                "ended_at": round(time.time(), 3),
                "device": os.environ.get("CUDA_VISIBLE_DEVICES", "cpu"),
                "queue": device_queue,
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "cached": cached,
                # on an object store: the requests this worker made so far
                **({"store": summary} if (summary := stage.store_summary()) else {}),
            },
            layout.shard_dir(model, shard.label) / SHARD_WORKER_FILE,
        )
        done.append(generated)
    return done


def localised(shard: Shard, layout: RunLayout) -> Shard:
    """``shard`` with its input paths as this machine has them."""
    return replace(
        shard,
        prompts_path=str(layout.localise(shard.prompts_path)),
        variants_path=str(layout.localise(shard.variants_path)),
    )


def shard_work() -> ShardWork:
    """This module's shards for ``flows.runtime.dispatch``: one shard here, a group in a
    device worker."""
    return ShardWork(run_one=run_shard, worker_flow=flow_entrypoint(shard_flow))
