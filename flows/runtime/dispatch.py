"""Where a model's shards run: in this process (one device), in one local worker process per
device group (several devices, no server needed), or as `sago-shard` deployment runs (one
work queue per device, served by workers anywhere). What runs is handed down by the flow
(``ShardWork``): nothing here knows a stage.

With several workers the plan is cut for them (``shard_workers``: each shard in one part per
worker) and the parts are dealt longest first by estimated tokens, each part of a shard to a
different worker (``sago_core.stages.shards.assign_shards``), so every worker pays its share of
every dataset however long its answers run. A part costs a worker about a second outside
the engine on two loaded cores, its share of the worker's one-time costs included (the
shards' task runs carry no tags: ``flows.shard.shard_places``), so the finer cut costs
little. ``python -m bench.shard_idle`` measures both plans: the cut plan's span was 0.925 of
the contiguous plan's at 1 ms per answer token; at the H100 pace (1.00-1.17) a worker's late
start on loaded cores decided it, which no plan made up front can absorb."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sago.flows.runtime.devices import worker_devices
from sago.flows.runtime.stage_runner import StageRunner
from sago_core.artifacts.layout import GENERATIONS_FILE, SHARD_WORKER_FILE, RunLayout
from sago_core.artifacts.store import read_text, write_json
from sago_core.backends.allocator import worker_env
from sago_core.backends.target import ModelTarget
from sago_core.config import OrchestrationSettings, RunConfig
from sago_core.errors import SagoError
from sago_core.stages.shards import Shard, assign_shards
from sago_core.storage.attached import refresh

ShardDone = Callable[[str, bool], None]  # (generations path, fully cached)
# One shard in this process: (generations path, analysis path, fully cached).
RunShard = Callable[[StageRunner, RunConfig, ModelTarget, Shard], tuple[str, str, bool]]
REPO_ROOT = Path(__file__).resolve().parents[2]  # a local device worker's working folder


@dataclass(frozen=True)
class ShardWork:
    """What the flow gives dispatch: how to run one shard here, and the flow a device
    worker serves its group with (``module:function``, imported in the worker)."""

    run_one: RunShard
    worker_flow: str


def flow_entrypoint(flow_object: Any) -> str:
    """``module:function`` of a Prefect flow (or a plain function), for a device worker."""
    function = getattr(flow_object, "fn", flow_object)
    return f"{function.__module__}:{function.__name__}"


def shard_workers(settings: OrchestrationSettings) -> int:
    """How many workers serve a model's shards: the plan cuts each shard for them (one: the
    plan, its files and its cache keys are those of a one-device run)."""
    return len(worker_devices(settings.devices, settings.devices_per_worker))


def dispatch_shards(
    stage: StageRunner,
    config: RunConfig,
    target: ModelTarget,
    shards: list[Shard],
    on_done: ShardDone,
    work: ShardWork,
) -> None:
    """Every shard of one model: in this process (one device), in one local worker process
    per device (several devices, no server needed), or through the `sago-shard` deployment
    (one work queue per device, served by workers anywhere)."""
    settings = config.orchestration
    devices = worker_devices(settings.devices, settings.devices_per_worker)
    if settings.mode == "local" and len(devices) == 1:
        run_here(stage, config, target, shards, on_done, work.run_one)
        return
    failures: list[str] = []
    lock = threading.Lock()

    def serve(index: int, group: list[Shard]) -> None:
        problem = serve_group(stage, config, target, group, index, devices[index], work)
        if problem:
            failures.append(f"{settings.queue_prefix}{index}: {problem}")
        collect_group(stage, target.spec, group, on_done, lock)

    groups = assign_shards(shards, len(devices), config.generation.max_new_tokens)
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
    run_one: RunShard,
) -> None:
    """One device, no server: every shard in this process, one after the other."""
    for shard in shards:
        generated, _, cached = run_one(stage, config, target, shard)
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
    work: ShardWork,
) -> str | None:
    """Run one device's group of shards; the problem, if any (never raises)."""
    settings = config.orchestration
    queue = f"{settings.queue_prefix}{index}"
    parameters = group_parameters(stage, config, target, group, queue)
    try:
        if settings.mode == "local":
            return local_device(work.worker_flow, device, parameters)
        return through_deployment(settings.shard_deployment, device, parameters)
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


def local_device(worker_flow: str, device: str, parameters: dict) -> str | None:
    """One worker process for ``device`` on this machine (CUDA_VISIBLE_DEVICES set before
    it starts), serving its group with ``worker_flow`` and reporting to this run's Prefect
    API; the problem, if any."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        api_url = str(client.api_url)
    layout = RunLayout(Path(parameters["run_dir"]))
    payload = layout.device_payload(parameters["device_queue"], parameters["model"])
    write_json(parameters, payload)
    env = worker_env(
        {**os.environ, "CUDA_VISIBLE_DEVICES": device, "PREFECT_API_URL": api_url.rstrip("/")}
    )
    done = subprocess.run(
        [sys.executable, "-m", "sago.flows.runtime.device_worker", worker_flow, str(payload)],
        env=env,
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    if done.returncode == 0:
        return None
    tail = done.stderr.strip().splitlines()[-1:] or [f"exit code {done.returncode}"]
    return f"device worker failed: {tail[0][:300]}"
