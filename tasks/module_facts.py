"""What ``code_version`` reads off each module's source, kept between processes.

A fresh process (a ``sago run``, a Prefect worker, a test's subprocess) would parse every
module a stage imports to compute its cache key: every module, seconds of CPU, where
hashing their bytes takes milliseconds. So each module's facts (the digest of its code, the
own modules it imports or names as ``"module:function"``) are kept in one JSON file in the
user's cache folder, under the module's name, its file (a package's ``__init__.py`` reads
differently from a module's file of the same bytes) and the sha256 of the bytes they were
read from: a file whose bytes changed misses, and is parsed again.

The memo also records what read the facts: the Python version (``ast.dump``'s text differs
between versions) and the bytes of the code that reads them (``caching.py`` and this
module), so facts read another way are never used. It only ever saves time: a missing,
corrupt or unwritable file counts as empty, and a write replaces the file whole, so
concurrent processes never see half of one (the last writer wins; an entry it dropped is
read again next time).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from sago_core.errors import SagoError
from sago_core.storage.atomic import write_local_bytes
from sago_core.storage.location import user_cache

MEMO_NAME = "module-facts.json"
# A memo larger than this is not read (it only ever grows by modules renamed or deleted):
# reading it would cost more than parsing the modules again.
MAX_MEMO_BYTES = 8_000_000


@dataclass(frozen=True)
class ModuleFacts:
    """One module as a stage's code version sees it: the digest of its code without
    docstrings, the own modules it imports, and those it names as ``"module:function"``."""

    digest: str
    imports: frozenset[str]
    references: frozenset[str]


class FactsMemo:
    """Every module's facts read so far, by module name, with the file and the sha256 of the
    bytes they were read from."""

    def __init__(self, path: Path | None, reader: str) -> None:
        self.path = path  # None: nowhere to keep it (kept in this process only)
        self.reader = reader
        self.entries = self._stored()
        self.added: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()  # Prefect computes cache keys on several threads

    def get(self, name: str, file: str, sha256: str) -> ModuleFacts | None:
        entry = self.entries.get(name)
        if not isinstance(entry, dict) or entry.get("sha256") != sha256:
            return None
        if entry.get("file") != file:
            return None
        digest = entry.get("digest")
        imports, references = entry.get("imports"), entry.get("references")
        if isinstance(digest, str) and _names(imports) and _names(references):
            return ModuleFacts(digest, frozenset(imports), frozenset(references))
        return None

    def put(self, name: str, file: str, sha256: str, facts: ModuleFacts) -> None:
        entry = {
            "file": file,
            "sha256": sha256,
            "digest": facts.digest,
            "imports": sorted(facts.imports),
            "references": sorted(facts.references),
        }
        with self.lock:
            self.entries[name] = self.added[name] = entry

    def save(self) -> None:
        """Write what this process added, over the entries on disk now (another process's
        included); a failure to write only costs the next process the time saved."""
        with self.lock:
            if not self.added or self.path is None:
                return
            modules = {**self._stored(), **self.added}
            body = json.dumps({"reader": self.reader, "modules": modules}, sort_keys=True)
            self.added.clear()
            with contextlib.suppress(OSError, SagoError):
                write_local_bytes(self.path, body.encode())

    def _stored(self) -> dict[str, Any]:
        if self.path is None:
            return {}
        try:
            if self.path.stat().st_size > MAX_MEMO_BYTES:
                return {}
            stored = json.loads(self.path.read_bytes())
        except Exception:  # unreadable or not JSON: as if there were none
            return {}
        modules = stored.get("modules") if isinstance(stored, dict) else None
        same_reader = isinstance(stored, dict) and stored.get("reader") == self.reader
        return modules if same_reader and isinstance(modules, dict) else {}


def _names(value: Any) -> TypeGuard[list[str]]:
    return isinstance(value, list) and all(isinstance(n, str) for n in value)


def reader_of(*code: Path) -> str:
    """What reads the facts: the Python version and the bytes of ``code`` (this module and
    the caller's), read when the caller is imported, so a process that runs old code after
    new code was installed never files the old code's facts as the new code's."""
    reader = hashlib.sha256(sys.version.encode())
    for path in (Path(__file__), *code):
        reader.update(path.read_bytes())
    return reader.hexdigest()


def memo_file() -> Path | None:
    """Where the memo lives: in the user's cache folder (``user_cache``); None where no
    cache folder can be named (no home directory: a container run as an unknown user)."""
    try:
        return user_cache() / MEMO_NAME
    except RuntimeError:  # Path.home() without HOME or a passwd entry
        return None
