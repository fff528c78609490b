"""Content-addressed cache keys for stage tasks.

A key is the hash of what determines a stage's output: the task name, the code version of
sago (a digest of its source files), every input artifact's bytes (parameters named
``*_path`` or ``*_paths``), and every other parameter's JSON form, except where the output is
written (``out_dir``, ``cache_dir``). Never the run id: a rerun or a resumed run hits the cache.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from sago_core.artifacts.store import sha256_of

_PACKAGES = ("sago_core", "tasks")
_EXCLUDED = frozenset({"out_dir", "cache_dir"})


@lru_cache(maxsize=1)
def code_version() -> str:
    """Digest of sago's own source: any change to the code invalidates every cached stage."""
    digest = hashlib.sha256()
    root = Path(__file__).resolve().parent.parent
    for package in _PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _fingerprint(name: str, value: Any) -> str:
    if name.endswith("_path"):
        return sha256_of(value)
    if name.endswith("_paths"):
        return json.dumps([sha256_of(v) for v in value])
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return json.dumps(value, sort_keys=True, default=str)


def stage_cache_key(context: Any, parameters: dict[str, Any]) -> str:
    digest = hashlib.sha256()
    digest.update(context.task.name.encode())
    digest.update(code_version().encode())
    for name in sorted(parameters):
        if name in _EXCLUDED:
            continue
        digest.update(name.encode())
        digest.update(_fingerprint(name, parameters[name]).encode())
    return f"{context.task.name}-{digest.hexdigest()}"
