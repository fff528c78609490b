"""A local device worker: ``python -m flows.runtime.device_worker MODULE:FLOW PAYLOAD.json``.

The parent run starts one per device group (``orchestration.devices_per_worker``
consecutive devices, usually one) with CUDA_VISIBLE_DEVICES already in the environment
("3" or "2,3"), so CUDA (if any) initialises in this process seeing exactly its devices. The
worker holds the machine-wide lock of each of them, builds the engine once (over all of
them: vLLM's tensor-parallel group, the transformers device map) and serves its group of
shards as one run of the flow it is given (``flows.shard:shard_flow``, the flow the
`sago-shard` deployment serves), reporting to the parent's Prefect API.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any


def load_flow(entrypoint: str) -> Any:
    """The flow named ``module:function``."""
    module, _, name = entrypoint.partition(":")
    if not module or not name:
        raise ValueError(f"device worker: {entrypoint!r} is not MODULE:FLOW")
    return getattr(importlib.import_module(module), name)


def main(argv: list[str]) -> int:
    shard_flow = load_flow(argv[0])
    payload = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    from sago.flows.runtime.devices import device_lock, group_members
    from sago_core.config import RunConfig
    from sago_core.errors import ConfigError

    config = RunConfig.model_validate(payload["config"])
    group = os.environ.get("CUDA_VISIBLE_DEVICES") or "cpu"
    owned = group_members(group)
    wanted = config.orchestration.devices_per_worker
    if owned != ["cpu"] and len(owned) != wanted:
        raise ConfigError(
            f"device worker sees CUDA_VISIBLE_DEVICES={group!r} ({len(owned)} devices) but "
            f"orchestration.devices_per_worker is {wanted}"
        )
    from sago_core.backends.target import ModelTarget

    target = ModelTarget.model_validate(payload["target"])  # devices included
    with device_lock(group):
        shard_flow(
            config,
            payload["model"],
            target,
            payload["shards"],
            payload["run_dir"],
            device_queue=payload["device_queue"],
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
