"""`sago server-setup`: what a Prefect server needs before sago's deployments can run.

- work pools ``cpu`` and ``gpu`` (process workers);
- queues ``device-0`` .. ``device-<N-1>`` in ``gpu``, each limited to one flow run, so two
  shards never share a GPU (one worker per queue, started with its CUDA_VISIBLE_DEVICES);
- an automation that marks a flow run Crashed when its heartbeats stop (its worker died),
  which frees the queue's slot. Workers must send heartbeats: start them with
  ``PREFECT_FLOWS_HEARTBEAT_FREQUENCY`` well below the silence (default 180 s vs 600 s).

Idempotent: existing pools, queues and the automation are left as they are.
"""

from __future__ import annotations

from datetime import timedelta

from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import WorkPoolCreate
from prefect.exceptions import ObjectAlreadyExists

ZOMBIE_AUTOMATION = "sago: crash flow runs whose worker died"
FINAL_EVENTS = (
    "prefect.flow-run.Completed",
    "prefect.flow-run.Failed",
    "prefect.flow-run.Cancelled",
    "prefect.flow-run.Crashed",
)


def setup_server(devices: int, queue_prefix: str = "device-", silence_s: int = 600) -> list[str]:
    created = []
    with get_client(sync_client=True) as client:
        for pool in ("cpu", "gpu"):
            try:
                client.create_work_pool(WorkPoolCreate(name=pool, type="process"))
                created.append(f"work pool {pool}")
            except ObjectAlreadyExists:
                pass
        for index in range(devices):
            name = f"{queue_prefix}{index}"
            try:
                client.create_work_queue(name=name, work_pool_name="gpu", concurrency_limit=1)
                created.append(f"queue {name} (limit 1)")
            except ObjectAlreadyExists:
                pass
    if _create_zombie_automation(silence_s):
        created.append(f"automation '{ZOMBIE_AUTOMATION}' ({silence_s} s without heartbeat)")
    return created


def _create_zombie_automation(silence_s: int) -> bool:
    from prefect.automations import Automation
    from prefect.client.schemas.objects import StateType
    from prefect.events.actions import ChangeFlowRunState
    from prefect.events.schemas.automations import EventTrigger, Posture

    try:
        if Automation.read(name=ZOMBIE_AUTOMATION) is not None:
            return False  # already there
    except ValueError:
        pass
    Automation(
        name=ZOMBIE_AUTOMATION,
        trigger=EventTrigger(
            after={"prefect.flow-run.heartbeat"},
            expect={"prefect.flow-run.heartbeat", *FINAL_EVENTS},
            match={"prefect.resource.id": ["prefect.flow-run.*"]},
            for_each={"prefect.resource.id"},
            posture=Posture.Proactive,
            threshold=1,
            within=timedelta(seconds=silence_s),
        ),
        actions=[
            ChangeFlowRunState(
                name="Crashed",
                state=StateType.CRASHED,
                message="no heartbeat: the worker running this flow died",
                force=True,
            )
        ],
    ).create()
    return True
