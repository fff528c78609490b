"""One `sago run` in this process whose disk fills up (or turns read-only) at a planned write.

    python -m tests.reliability.disk_target CONFIG.yaml CALLS.jsonl [KIND ERRNO HIT]

Everything of ``target.py`` (the ``mock:`` backend logging its calls, the word-overlap
scorer), plus: the HIT-th durable write of a file of KIND fails with ERRNO (``ENOSPC`` or
``EROFS``) at its ``fsync``, where a full disk reports a delayed allocation. Every durable
write of sago ends in an fsync: an artifact's or result record's temp file, a cache entry,
the manifest, an appended ledger line. KIND, by where the file lies:

    artifact   a stage's output in the run folder (Parquet, summary.md, report.html, ...)
    result     a Prefect result record (``.prefect-results/``) or its checksum
    cache      an entry of the other shared caches (``runs/.cache/``: API answers)
    rows       a part of the row cache (``runs/.cache/rows/``: answers and measurements)
    semantic   a semantic filter score (``runs/.cache/semantic/``)
    ledger     the run's API ledger (``api_ledger.jsonl``)
    manifest   the run's ``manifest.json``

Each injected failure writes ``INJECTED <kind> <errno> <path>`` to stderr.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections import Counter
from pathlib import Path

from tests.reliability import target

KINDS = ("artifact", "result", "cache", "rows", "semantic", "ledger", "manifest")
_seen: Counter[str] = Counter()


def kind_of(path: str, runs_dir: str) -> str | None:
    if not path.startswith(runs_dir):
        return None
    inside = Path(path).relative_to(runs_dir).parts
    name = Path(path).name
    if inside[0] == ".cache":
        own = {"rows", "semantic"}
        return inside[1] if len(inside) > 1 and inside[1] in own else "cache"
    if inside[0].startswith("."):
        return None  # Prefect's own home
    if ".prefect-results" in inside:
        return "result"
    if name == "api_ledger.jsonl":
        return "ledger"
    if name.startswith(".manifest.json.") or name == "manifest.json":
        return "manifest"
    return "artifact"


def install(runs_dir: Path, kind: str, code: int, hit: int) -> None:
    real_fsync = os.fsync
    root = str(runs_dir.resolve())

    def fsync(fd: int) -> None:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            path = os.readlink(f"/proc/self/fd/{fd}")
            found = kind_of(path, root)
            if found is not None:
                _seen[found] += 1
                if found == kind and _seen[found] == hit:
                    note = f"INJECTED {kind} {errno.errorcode[code]} {path}\n"
                    os.write(2, note.encode())  # past Prefect's capture of prints
                    raise OSError(code, os.strerror(code), path)
        real_fsync(fd)

    os.fsync = fsync


def main(argv: list[str]) -> int:
    config, calls = Path(argv[0]), Path(argv[1])
    from sago_cli.main import main as sago
    from sago_core.config import read_config_file

    runs_dir = Path(read_config_file(config)["runs_dir"])
    target.install(calls, runs_dir)
    if len(argv) == 5:
        kind, code, hit = argv[2], getattr(errno, argv[3]), int(argv[4])
        assert kind in KINDS, kind
        install(runs_dir, kind, code, hit)
    return sago(["run", "--config", str(config)])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
