"""Read an untrusted GGUF file's header in a separate process with a time and memory cap.

The Python GGUF reader trusts the counts in a file's header; a crafted file can make it
loop for a very long time or allocate without bound. Before transformers parses a GGUF in
this process, a child process reads it under ``RLIMIT_AS`` (the file's size, which the
reader maps, plus ``memory_mb``) and a wall-clock limit; a file that fails is refused with
a typed error naming it.

    python -m sago_core.backends.gguf_probe FILE   # prints the header summary as JSON
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from sago_core.errors import ModelLoadError


def read_header(path: Path) -> dict[str, Any]:
    """In this process: what the file says it holds (run only inside the probe)."""
    from gguf import GGUFReader

    reader = GGUFReader(path)
    field = reader.fields.get("general.architecture")
    architecture = None
    if field is not None and field.data:
        architecture = bytes(field.parts[field.data[0]]).decode("utf-8", "replace")
    return {
        "architecture": architecture,
        "tensors": len(reader.tensors),
        "fields": len(reader.fields),
    }


def _limit_memory(cap_bytes: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (cap_bytes, cap_bytes))


def probe_gguf(path: Path, timeout_s: float = 120.0, memory_mb: int = 2048) -> dict[str, Any]:
    """The header summary, read by a capped child process; ModelLoadError if it fails.
    A file version (path, size, mtime) that passed is not probed again in this process."""
    stat = path.stat()
    return dict(_probe(str(path), stat.st_size, stat.st_mtime_ns, timeout_s, memory_mb))


@lru_cache(maxsize=32)
def _probe(name: str, size: int, mtime_ns: int, timeout_s: float, memory_mb: int) -> dict[str, Any]:
    path = Path(name)
    cap = size + memory_mb * 2**20
    try:
        done = subprocess.run(
            [sys.executable, "-m", "sago_core.backends.gguf_probe", str(path)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            preexec_fn=lambda: _limit_memory(cap),
            cwd=Path(__file__).resolve().parents[2],
        )
    except subprocess.TimeoutExpired as exc:
        raise ModelLoadError(
            f"GGUF file {path}: reading its header took longer than {timeout_s:.0f} s "
            "(a malformed or crafted file); refused"
        ) from exc
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1][:300]
        raise ModelLoadError(f"GGUF file {path} is not a readable GGUF file: {last}")
    summary: dict[str, Any] = json.loads(done.stdout)
    if not summary["tensors"]:
        raise ModelLoadError(f"GGUF file {path} holds no tensors")
    return summary


if __name__ == "__main__":
    print(json.dumps(read_header(Path(sys.argv[1]))))
