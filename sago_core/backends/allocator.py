"""glibc's allocator kept flat under the scoring pass: the one owner of that setting.

glibc serves an allocation above its mmap threshold (128 KiB at start) with a fresh mapping
and returns it whole when freed. But each time such a block is freed, glibc raises the
threshold to that block's size (up to 32 MiB), so once the first batches' logits and hidden
states were freed, later batches' buffers of a few MiB come from the heap instead: a heap
that fragments as their sizes vary and is never given back. The scoring pass on CPU grew by
gigabytes that way over a shard (docs/guide/performance.md). A fixed threshold turns the
raising off.

Two doors, one value: ``tune_heap()`` calls ``mallopt`` in this process (when a
transformers engine is built, before its generation), and ``worker_env()`` puts
``MALLOC_MMAP_THRESHOLD_`` in the environment of a process sago starts (the vLLM worker, a
device worker), which glibc reads at its own start.
Both are no-ops off glibc. A value the user set in the environment is left alone; a run
started with ``SAGO_MALLOC_TUNING=0`` keeps glibc's dynamic default (how ``python -m
bench.allocator`` measures the difference).
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Mapping

MMAP_THRESHOLD = 131072  # bytes: glibc's own starting value, kept fixed
# A fixed mmap threshold also freezes the trim threshold where it is: back to glibc's
# default (the same 128 KiB), so the heap's free top is returned as when the variable is set.
TRIM_THRESHOLD = 131072
THRESHOLD_VARIABLE = "MALLOC_MMAP_THRESHOLD_"
SWITCH_VARIABLE = "SAGO_MALLOC_TUNING"
_M_TRIM_THRESHOLD = -1  # glibc's malloc.h
_M_MMAP_THRESHOLD = -3

_outcome: str | None = None


def _glibc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return None
    return libc if hasattr(libc, "gnu_get_libc_version") and hasattr(libc, "mallopt") else None


def _switched_off(env: Mapping[str, str]) -> bool:
    return env.get(SWITCH_VARIABLE, "").strip().lower() in ("0", "false", "no", "off")


def tune_heap() -> str:
    """Fix glibc's mmap and trim thresholds in this process (once; later calls return the
    first outcome): what was done, in words."""
    global _outcome
    if _outcome is not None:
        return _outcome
    libc = _glibc()
    if libc is None:
        _outcome = "not glibc: allocator left as it is"
    elif _switched_off(os.environ):
        _outcome = f"glibc's dynamic mmap threshold kept ({SWITCH_VARIABLE}=0)"
    elif THRESHOLD_VARIABLE in os.environ:
        _outcome = f"{THRESHOLD_VARIABLE}={os.environ[THRESHOLD_VARIABLE]} set by the user"
    else:
        ok = libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
        ok = libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1 and ok
        _outcome = (
            f"mallopt: mmap threshold fixed at {MMAP_THRESHOLD} bytes"
            if ok
            else "mallopt refused the thresholds: allocator left as it is"
        )
    return _outcome


def worker_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` for a process sago starts, with the fixed mmap threshold added (glibc only;
    not over a value the environment already has, nor with ``SAGO_MALLOC_TUNING=0``)."""
    out = dict(env)
    if _glibc() is not None and not _switched_off(out):
        out.setdefault(THRESHOLD_VARIABLE, str(MMAP_THRESHOLD))
    return out
