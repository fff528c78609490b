"""A small content-addressed JSON cache on disk (one file per key, written atomically).

Used for model outputs that are expensive and must reproduce across runs, e.g. structural
rewrites keyed by (rewriter identity, instruction version, prompt). Only values the caller
has validated are stored; a corrupt or unreadable entry counts as a miss.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from sago_core.artifacts.store import write_json
from sago_core.storage.attached import ensure_local


class JsonCache:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @staticmethod
    def key(*parts: str) -> str:
        return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> Any | None:
        path = self._path(key)
        try:
            ensure_local(path)  # on an object store: the entry another machine cached
            return json.loads(path.read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
            return None

    def put(self, key: str, value: Any) -> None:
        write_json(value, self._path(key))
