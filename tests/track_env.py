"""Whether the track extra (mlflow-skinny, wandb) is installed; ``SAGO_REQUIRE_TRACK=1`` (set by
.ci/run, which installs requirements-track.lock) turns its absence into a failure instead of a
skip. Also a real MLflow tracking server for a test module, and a reader of W&B's offline
run files."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.prefect_server import free_port

MLFLOW = str(Path(sys.executable).with_name("mlflow"))
# W&B's transaction log (``run-<id>.wandb``): a 7-byte header, then LevelDB's log format:
# 32 KiB blocks of records, each a 7-byte header (crc32, length, type) and its bytes.
WANDB_HEADER, BLOCK, RECORD_HEADER = 7, 32768, 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def require_track(*modules: str) -> None:
    missing = [m for m in modules or ("mlflow", "wandb") if importlib.util.find_spec(m) is None]
    if not missing:
        return
    reason = f"the track extra is not installed ({', '.join(missing)} missing)"
    if os.environ.get("SAGO_REQUIRE_TRACK") == "1":
        pytest.fail(f"SAGO_REQUIRE_TRACK=1 but {reason}")
    pytest.skip(reason)


@contextlib.contextmanager
def mlflow_server(folder: Path, startup_s: float = 240) -> Iterator[tuple[str, subprocess.Popen]]:
    """``mlflow server`` on a free port (sqlite store, local artifact root, one worker);
    yields its URI and process. Stopped (and waited for) on exit."""
    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    log = (folder / "mlflow-server.log").open("w")
    env = {
        **os.environ,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # MLflow imports litellm: no network fetch
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
    }
    process = subprocess.Popen(
        [
            MLFLOW,
            "server",
            "--backend-store-uri",
            f"sqlite:///{folder / 'mlflow.db'}",
            "--default-artifact-root",
            str(folder / "artifacts"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    try:
        deadline = time.monotonic() + startup_s
        while True:
            if process.poll() is not None:
                pytest.fail(f"mlflow server exited: {(folder / 'mlflow-server.log').read_text()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{uri}/health", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                pytest.fail(f"mlflow server did not start in {startup_s} s")
            time.sleep(0.5)
        yield uri, process
    finally:
        stop(process)
        log.close()


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wandb_records(path: Path) -> Iterator[Any]:
    """Every record of an offline W&B run's ``.wandb`` file, parsed (W&B's protobuf)."""
    from wandb.proto import wandb_internal_pb2

    data, pos, pending = path.read_bytes(), WANDB_HEADER, b""
    while pos + RECORD_HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < RECORD_HEADER:  # a block's tail too short for a header is padding
            pos += left
            continue
        length = int.from_bytes(data[pos + 4 : pos + 6], "little")
        kind = data[pos + 6]
        chunk = data[pos + RECORD_HEADER : pos + RECORD_HEADER + length]
        pos += RECORD_HEADER + length
        if kind in (FIRST, MIDDLE):
            pending = chunk if kind == FIRST else pending + chunk
            continue
        if kind not in (FULL, LAST):
            break
        record = wandb_internal_pb2.Record()
        record.ParseFromString(pending + chunk if kind == LAST else chunk)
        pending = b""
        yield record


def wandb_history(path: Path) -> dict[str, float]:
    """The metrics an offline W&B run logged (its history rows, merged)."""
    import json

    values: dict[str, float] = {}
    for record in wandb_records(path):
        if record.WhichOneof("record_type") == "history":
            for item in record.history.item:
                key = item.key or "/".join(item.nested_key)
                if not key.startswith("_"):
                    values[key] = json.loads(item.value_json)
    return values
