"""Shards of model work: run in this process, or dispatched to GPU workers as `sago-shard`
flow runs (one per device queue; each worker process builds its engine once and serves all
the shards it is given)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import polars as pl
from prefect import flow

from flows.devices import worker_devices
from flows.runtime.object_store import attach_runs_store
from flows.runtime.stage_runner import StageRunner
from sago_core.artifacts.layout import GENERATIONS_FILE, SHARD_WORKER_FILE, RunLayout
from sago_core.artifacts.store import read_text, write_json
from sago_core.backends.target import ModelTarget, relocated
from sago_core.config import RunConfig
from sago_core.errors import SagoError
from sago_core.stages.shards import Shard
from sago_core.storage.attached import refresh
from tasks.models import analyse_task, generate_task

ShardDone = Callable[[str, bool], None]  # (generations path, fully cached)


def all_answered(generations_path: str) -> bool:
    """A shard is committed only when every request got a valid answer."""
    failures = pl.scan_parquet(generations_path).select(pl.col("failure_reason").count())
    return failures.collect().item() == 0


def run_shard(
    stage: StageRunner, config: RunConfig, target: ModelTarget, shard: Shard
) -> tuple[str, str, bool]:
    """Generation and the scoring pass of one shard; (generations, analysis, cached)."""
    model, layout = target.spec, stage.layout
    where = str(layout.shard_dir(model, shard.label))
    places: dict[str, Any] = {
        "cache_dir": str(layout.cache.root),
        "ledger_file": str(layout.ledger),
    }
    labels = [f"model:{model}", f"dataset:{shard.dataset}", f"shard:{shard.label}"]
    generated = stage(
        generate_task,
        run_tags=labels,
        commit_if=all_answered,
        model=model,
        shard=shard.label,
        target=target,
        prompts_path=shard.prompts_path,
        variants_path=shard.variants_path,
        settings=config.generation,
        out_dir=where,
        **places,
    )
    cached = stage.last_cached
    analysed = stage(
        analyse_task,
        run_tags=labels,
        model=model,
        shard=shard.label,
        target=target,
        generations_path=generated,
        settings=config.analysis.scoring_pass(),
        out_dir=where,
        **places,
    )
    return generated, analysed, cached and stage.last_cached


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
        generated, _, cached = run_shard(stage, config, target, shard)
        write_json(
            {
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


def device_groups(shards: list[Shard], devices: int) -> list[list[Shard]]:
    """Contiguous, even groups: one per device queue (empty groups dropped)."""
    size = -(-len(shards) // max(devices, 1))
    return [shards[i : i + size] for i in range(0, len(shards), size)] if shards else []


def dispatch_shards(
    stage: StageRunner,
    config: RunConfig,
    target: ModelTarget,
    shards: list[Shard],
    on_done: ShardDone,
) -> None:
    """Every shard of one model: in this process (one device), in one local worker process
    per device (several devices, no server needed), or through the `sago-shard` deployment
    (one work queue per device, served by workers anywhere)."""
    settings = config.orchestration
    devices = worker_devices(settings.devices, settings.devices_per_worker)
    if settings.mode == "local" and len(devices) == 1:
        run_here(stage, config, target, shards, on_done)
        return
    failures: list[str] = []
    lock = threading.Lock()

    def serve(index: int, group: list[Shard]) -> None:
        problem = serve_group(stage, config, target, group, index, devices[index])
        if problem:
            failures.append(f"{settings.queue_prefix}{index}: {problem}")
        collect_group(stage, target.spec, group, on_done, lock)

    groups = device_groups(shards, len(devices))
    threads = [threading.Thread(target=serve, args=(i, g)) for i, g in enumerate(groups)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise SagoError(
            f"shard runs of {target.spec} did not complete ({'; '.join(failures)}); finished "
            "shards are kept: `sago resume` computes only the rest"
        )


def run_here(
    stage: StageRunner,
    config: RunConfig,
    target: ModelTarget,
    shards: list[Shard],
    on_done: ShardDone,
) -> None:
    """One device, no server: every shard in this process, one after the other."""
    for shard in shards:
        generated, _, cached = run_shard(stage, config, target, shard)
        on_done(generated, cached)


def group_parameters(
    stage: StageRunner, config: RunConfig, target: ModelTarget, group: list[Shard], queue: str
) -> dict[str, Any]:
    """What a device worker (local process or `sago-shard` run) needs for its shards."""
    portable = config.model_copy(update={"runs_dir": config.runs_dir.resolve()})
    return {
        "config": portable.model_dump(mode="json", by_alias=True),
        "model": target.spec,
        "target": target.model_dump(mode="json"),
        "shards": [asdict(s) for s in group],
        "run_dir": str(stage.run_dir),
        "device_queue": queue,
    }


def serve_group(
    stage: StageRunner,
    config: RunConfig,
    target: ModelTarget,
    group: list[Shard],
    index: int,
    device: str,
) -> str | None:
    """Run one device's group of shards; the problem, if any (never raises)."""
    settings = config.orchestration
    queue = f"{settings.queue_prefix}{index}"
    parameters = group_parameters(stage, config, target, group, queue)
    serve_one = local_device if settings.mode == "local" else through_deployment
    try:
        return serve_one(settings.shard_deployment, device, parameters)
    except Exception as exc:  # reported by the caller, after every group has finished
        return f"{type(exc).__name__}: {exc}"


def collect_group(
    stage: StageRunner, model: str, group: list[Shard], on_done: ShardDone, lock: threading.Lock
) -> None:
    """Book every shard of a group that a worker finished (the rest are left for resume)."""
    for shard in group:
        folder = stage.layout.shard_dir(model, shard.label)
        path = folder / GENERATIONS_FILE
        refresh(path)  # a worker elsewhere pushed it (or recomputed it) to the runs store
        refresh(folder / SHARD_WORKER_FILE)
        if not path.exists():
            continue
        worker = json.loads(read_text(folder / SHARD_WORKER_FILE))
        cached = bool(worker.get("cached"))
        with lock:
            stage.note("generate", str(path), cached, device=worker.get("device"))
            if worker.get("store"):  # cumulative per worker process: its last shard's counts
                process = f"{worker.get('host')}-{worker.get('pid')}"
                stage.worker_requests[process] = worker["store"]["requests"]
        on_done(str(path), cached)


def through_deployment(deployment: str, device: str, parameters: dict) -> str | None:
    """One `sago-shard` flow run on the device's work queue; the problem, if any."""
    from prefect.deployments import run_deployment

    queue = parameters["device_queue"]
    run = run_deployment(
        deployment,
        parameters=parameters,
        work_queue_name=queue,
        timeout=None,
        poll_interval=2,
        tags=[f"model:{parameters['model']}", queue],
    )
    state = getattr(run, "state", None)
    return (
        None
        if state is not None and state.is_completed()
        else (state.name if state else "no state")
    )


def local_device(deployment: str, device: str, parameters: dict) -> str | None:
    """One worker process for ``device`` on this machine (CUDA_VISIBLE_DEVICES set before
    it starts), reporting to this run's Prefect API; the problem, if any."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        api_url = str(client.api_url)
    layout = RunLayout(Path(parameters["run_dir"]))
    payload = layout.device_payload(parameters["device_queue"], parameters["model"])
    write_json(parameters, payload)
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": device, "PREFECT_API_URL": api_url.rstrip("/")}
    done = subprocess.run(
        [sys.executable, "-m", "flows.device_worker", str(payload)],
        env=env,
        cwd=Path(__file__).resolve().parent.parent,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    if done.returncode == 0:
        return None
    tail = done.stderr.strip().splitlines()[-1:] or [f"exit code {done.returncode}"]
    return f"device worker failed: {tail[0][:300]}"
