"""sago fixes glibc's mmap threshold itself (sago_core/backends/allocator.py): in its own
process at the scoring pass (``mallopt``), and in the environment of the processes it
starts; off glibc both are no-ops. The vLLM worker's environment is checked in
tests/flow/test_vllm_backend.py (a scripted worker)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from sago_core.backends import allocator

# In a fresh process: is a 16 MiB block mmapped once a 24 MiB block was freed? glibc's
# dynamic threshold says no (it rose to 24 MiB). Then tune the heap and ask again, a size up
# (20 after 30 MiB, more than the heap's free top now holds): the fixed threshold says yes.
# mallinfo2's ``hblks`` counts the mmapped blocks.
PROBE = """
import ctypes, json
from sago_core.backends import allocator

class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
libc.mallinfo2.restype = Info

def mmapped_after_a_bigger_free(big_mib, probe_mib):
    libc.free(libc.malloc(big_mib << 20))
    blocks = libc.mallinfo2().hblks
    probe = libc.malloc(probe_mib << 20)
    mmapped = libc.mallinfo2().hblks > blocks
    libc.free(probe)
    return mmapped

before = mmapped_after_a_bigger_free(24, 16)
outcome = allocator.tune_heap()
print(json.dumps([before, outcome, mmapped_after_a_bigger_free(30, 20)]))
"""


def _glibc_only() -> None:
    if allocator._glibc() is None:
        pytest.skip("not glibc: the thresholds are glibc's")


def test_the_scoring_pass_call_fixes_the_threshold_in_this_process() -> None:
    _glibc_only()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in (allocator.THRESHOLD_VARIABLE, allocator.SWITCH_VARIABLE)
    }
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    before, outcome, after = json.loads(done.stdout.strip().splitlines()[-1])
    assert before is False  # glibc's default: the threshold rose over the freed 24 MiB
    assert outcome == "mallopt: mmap threshold fixed at 131072 bytes"
    assert after is True


def test_a_started_process_gets_the_variable_unless_set_or_switched_off() -> None:
    _glibc_only()
    assert allocator.worker_env({"PATH": "/bin"}) == {
        "PATH": "/bin",
        "MALLOC_MMAP_THRESHOLD_": "131072",
    }
    mine = {"MALLOC_MMAP_THRESHOLD_": "65536"}
    assert allocator.worker_env(mine) == mine  # the user's own value wins
    assert allocator.worker_env({"SAGO_MALLOC_TUNING": "0"}) == {"SAGO_MALLOC_TUNING": "0"}


def test_off_glibc_nothing_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(allocator, "_glibc", lambda: None)
    monkeypatch.setattr(allocator, "_outcome", None)
    assert allocator.tune_heap() == "not glibc: allocator left as it is"
    assert allocator.worker_env({"PATH": "/bin"}) == {"PATH": "/bin"}
