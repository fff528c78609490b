"""A local device worker: ``python -m flows.device_worker PAYLOAD.json``.

The parent run starts one per device with CUDA_VISIBLE_DEVICES already in the environment,
so CUDA (if any) initialises in this process seeing exactly its one device. The worker
holds that device's machine-wide lock, builds the engine once and serves its group of
shards as one `sago-shard` flow run, reporting to the parent's Prefect API.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    payload = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    from flows.devices import device_lock
    from flows.shard import shard_flow
    from sago_core.config import RunConfig

    config = RunConfig.model_validate(payload["config"])
    with device_lock(os.environ.get("CUDA_VISIBLE_DEVICES") or "cpu"):
        shard_flow(
            config,
            payload["model"],
            payload["identity"],
            payload["shards"],
            payload["run_dir"],
            device_queue=payload["device_queue"],
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
