"""Which devices this machine offers, found without initialising CUDA in this process, and
the machine-wide lock that keeps two local runs from sharing one GPU."""

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


@contextmanager
def device_lock(device: str) -> Iterator[None]:
    """Hold ``device`` for this process (machine-wide, released by the kernel on death)."""
    folder = Path(tempfile.gettempdir()) / "sago-devices"
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / f"device-{device}.lock", os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
