"""The registry of evaluated models, kept in the artifact store (never in memory).

One entry per (model spec, identity): a re-released model with new weights has a new
identity and is evaluated again. Claims make overlapping watch runs safe: a claim file is
created with O_CREAT | O_EXCL, so exactly one run wins a model; a claim whose owner died is
taken over after ``stale_after_s``; on an object store a claim is a lease object created with
a conditional put, with the same expiry (``sago_core.storage.leases``). A finished
evaluation writes ``<key>.json``; the ``registry.parquet`` table is rebuilt from those
files (no read-modify-write to lose). A release evaluated under a budget keeps its steps
(``watch/steps.py``: each budget it ran at, the cells, the verdicts against the last release)
in its entry, and ``registry.parquet`` shows them in one line.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import socket
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import polars as pl

from sago_core.artifacts.layout import (
    CARD_HTML_FILE,
    CARD_JSON_FILE,
    CARD_MD_FILE,
    FINISHED_RUN_FILES,
)
from sago_core.artifacts.store import write_json, write_parquet
from sago_core.storage.attached import current, ensure_local, pull
from sago_core.storage.leases import Lease, release, try_acquire
from sago_core.storage.mirror import Mirror
from sago_core.storage.objects import ObjectStore
from sago_core.watch.steps import describe_steps

REGISTRY_SCHEMA = {
    "spec": pl.String,
    "identity": pl.String,
    "run_dir": pl.String,
    "evaluated_at": pl.Float64,
    "budget_steps": pl.String,  # the budgets the release ran at (steps.describe_steps)
}


@dataclass(frozen=True)
class Entry:
    spec: str
    identity: str
    run_dir: str
    evaluated_at: float
    # A release run under a budget: each step's record (steps.Step.record), in order.
    budget_steps: list[dict[str, Any]] = field(default_factory=list)


class Registry:
    def __init__(self, root: Path, stale_after_s: float = 6 * 3600) -> None:
        self.root = root
        self.folder = root / "registry"
        self.stale_after_s = stale_after_s
        self._leases: dict[Path, Lease] = {}
        self._holder = f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"

    @staticmethod
    def key(spec: str, identity: str) -> str:
        return hashlib.sha256(f"{spec}\x1f{identity}".encode()).hexdigest()[:20]

    def done(self, spec: str, identity: str) -> bool:
        return ensure_local(self.folder / f"{self.key(spec, identity)}.json")

    def claim(self, spec: str, identity: str) -> bool:
        """True for exactly one caller per model (until released or stale)."""
        path = self.folder / f"{self.key(spec, identity)}.claim"
        on_store = _store_key(path)
        if on_store is not None:  # machines sharing only a store: a lease on it
            store, key = on_store
            lease = try_acquire(store, key, self._holder, ttl_s=self.stale_after_s)
            if lease is None:
                return False
            self._leases[path] = lease
            return not self.done(spec, identity)
        self.folder.mkdir(parents=True, exist_ok=True)
        owner = json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "at": time.time()})
        for _ in range(2):
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                if not self._stale(path):
                    return False
                path.unlink(missing_ok=True)  # its owner died; take it over
                continue
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(owner)
            return not self.done(spec, identity)
        return False

    def _stale(self, path: Path) -> bool:
        try:
            return time.time() - path.stat().st_mtime > self.stale_after_s
        except FileNotFoundError:
            return True

    def release(self, spec: str, identity: str) -> None:
        path = self.folder / f"{self.key(spec, identity)}.claim"
        lease = self._leases.pop(path, None)
        on_store = _store_key(path)
        if lease is not None and on_store is not None:
            release(on_store[0], lease)
        path.unlink(missing_ok=True)

    def record(
        self,
        spec: str,
        identity: str,
        run_dir: Path,
        budget_steps: list[dict[str, Any]] | None = None,
    ) -> Path:
        entry = Entry(spec, identity, str(run_dir), time.time(), list(budget_steps or []))
        path = write_json(asdict(entry), self.folder / f"{self.key(spec, identity)}.json")
        self.release(spec, identity)
        return path

    def entries(self) -> list[Entry]:
        on_store = current() is not None
        if on_store:
            pull(self.folder)  # the entries other machines recorded
        found = [
            Entry(**json.loads(p.read_text(encoding="utf-8")))
            for p in sorted(self.folder.glob("*.json"))
        ]
        if not on_store:
            return found
        local = [replace(e, run_dir=str(self.root / Path(e.run_dir).name)) for e in found]
        for entry in local:  # what the card and the leaderboard read, not the whole folder
            for name in (*FINISHED_RUN_FILES, CARD_JSON_FILE, CARD_MD_FILE, CARD_HTML_FILE):
                ensure_local(Path(entry.run_dir) / name)
        return local

    def write_table(self) -> Path:
        rows = [
            {**asdict(e), "budget_steps": describe_steps(e.budget_steps)} for e in self.entries()
        ]
        frame = pl.DataFrame(rows, schema=REGISTRY_SCHEMA)
        return write_parquet(
            frame.sort("evaluated_at"), self.root / "registry.parquet", REGISTRY_SCHEMA
        )


def _store_key(path: Path) -> tuple[ObjectStore, str] | None:
    """The attached runs store and ``path``'s key on it (None: a local runs folder)."""
    mirror = current()
    if not isinstance(mirror, Mirror):
        return None
    key = mirror.key(path)
    return None if key is None else (mirror.store, key)


def discover_models(source: str) -> list[str]:
    """Model specs from a watch source:

    - a directory: every sub-folder with a config.json and every .gguf file, as ``hf:``;
    - a text file: one spec per line (``#`` comments);
    - ``hub:<organisation>[/<pattern>]``: models of a hub organisation (needs a network).
    """
    if source.startswith("hub:"):
        return _discover_hub(source.removeprefix("hub:"))
    path = Path(source)
    if path.is_dir():
        found = [p for p in sorted(path.iterdir()) if (p / "config.json").is_file()]
        found += sorted(path.glob("*.gguf"))
        return [f"hf:{p.resolve()}" for p in found]
    if path.is_file():
        lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
        return [line for line in lines if line]
    from sago_core.errors import InputError

    raise InputError("is neither a folder of models, a list file, nor hub:<org>", file=source)


def _discover_hub(query: str) -> list[str]:
    from huggingface_hub import HfApi

    author, _, pattern = query.partition("/")
    models = HfApi().list_models(author=author, search=pattern or None, sort="created_at")
    return [f"hf:{m.id}" for m in models]
