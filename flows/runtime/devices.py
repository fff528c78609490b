"""Which devices this machine offers, found without initialising CUDA in this process, how
they are grouped into workers (a model larger than one GPU gets a group of consecutive
devices per worker), and the machine-wide locks that keep two local runs from sharing a GPU."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from sago_core.errors import ConfigError


def detect_gpus() -> list[str]:
    """CUDA_VISIBLE_DEVICES when set, else ``nvidia-smi -L``; empty on a CPU-only machine."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [d.strip() for d in visible.split(",") if d.strip() and d.strip() != "-1"]
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        listed = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    gpus = [line for line in listed.stdout.splitlines() if line.startswith("GPU ")]
    return [str(i) for i in range(len(gpus))]


def device_ids(devices: int | Literal["auto"]) -> list[str]:
    """The devices shards are spread over: "auto" = every GPU found (or the CPU alone); N =
    the first N GPUs this process may use (a CUDA_VISIBLE_DEVICES of "2,3" gives 2 and 3),
    or plain indexes 0..N-1 where fewer are found (CPU-only machines, tests)."""
    found = detect_gpus()
    if devices == "auto":
        return found or ["cpu"]
    return found[:devices] if len(found) >= devices else [str(i) for i in range(devices)]


def worker_devices(devices: int | Literal["auto"], per_worker: int = 1) -> list[str]:
    """One entry per worker: the ``CUDA_VISIBLE_DEVICES`` of its group of ``per_worker``
    consecutive devices ("0,1", "2,3" for 4 devices, 2 per worker). ``devices`` as in
    ``device_ids``; "auto" uses every whole group of the GPUs found (a remainder stays idle)
    and, on a machine without GPUs, the CPU alone (one worker, whatever ``per_worker``)."""
    if per_worker < 1:
        raise ConfigError(f"devices_per_worker must be >= 1, not {per_worker}")
    ids = device_ids(devices)
    if ids == ["cpu"]:
        return ids
    if devices != "auto" and len(ids) % per_worker:
        raise ConfigError(
            f"orchestration.devices ({len(ids)}) must be a multiple of devices_per_worker "
            f"({per_worker})"
        )
    if len(ids) < per_worker:
        raise ConfigError(
            f"orchestration.devices_per_worker is {per_worker} but only {len(ids)} GPU(s) "
            f"found ({','.join(ids)}); one worker needs {per_worker}"
        )
    whole = len(ids) - len(ids) % per_worker
    return [",".join(ids[i : i + per_worker]) for i in range(0, whole, per_worker)]


def group_members(group: str) -> list[str]:
    """The devices of a worker's group ("2,3" -> ["2", "3"]; "" or "-1" -> ["cpu"])."""
    members = [d.strip() for d in group.split(",") if d.strip() and d.strip() != "-1"]
    return members or ["cpu"]


@contextmanager
def device_lock(device: str) -> Iterator[None]:
    """Hold ``device`` for this process (machine-wide, released by the kernel on death). A
    group ("0,1") holds each of its devices, taken in one global order so two groups that
    overlap can never deadlock, and a run with another grouping still never shares a GPU."""
    folder = Path(tempfile.gettempdir()) / "sago-devices"
    folder.mkdir(parents=True, exist_ok=True)
    members = sorted(set(group_members(device)), key=lambda d: (not d.isdigit(), d.zfill(8)))
    held: list[int] = []
    try:
        for member in members:
            fd = os.open(folder / f"device-{member}.lock", os.O_RDWR | os.O_CREAT, 0o666)
            held.append(fd)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        for fd in reversed(held):
            os.close(fd)
