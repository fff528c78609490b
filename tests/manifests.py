"""Reading a finished run's manifest in tests."""

from __future__ import annotations

import json
from pathlib import Path


def generate_cache_hits(run_dir: Path) -> dict[str, bool]:
    """Shard label -> whether its generation was a cache hit in the run's last pass."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    return {
        s["path"].split("/shards/")[1].split("/")[0]: s["cache_hit"]
        for s in manifest["stages"]
        if s["stage"] == "generate"
    }
