"""Shared pieces of the reliability suite: inputs for a small run on the fake backend,
running the target in a subprocess, and reading what a run folder committed."""

from __future__ import annotations

import atexit
import itertools
import json
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import polars as pl
import pyarrow.parquet as pq
import yaml

from sago_core.artifacts.store import sha256_of
from tests.grids import tiny_variants

ROOT = Path(__file__).resolve().parents[2]
QUESTIONS = (
    "What is the boiling point of water at sea level?",
    "Who wrote the novel Pride and Prejudice?",
    "How many legs does a spider have?",
    "Which planet is known as the red planet?",
)
FINAL_TABLES = ("generations", "deltas", "scores", "summary")


def write_inputs(shared: Path, root: Path) -> Path:
    """The run config of ``root`` (runs in ``root/runs``), over the ``mock:`` backend and a
    four-question data file in ``shared`` (the same paths for every run that is compared)."""
    shared.mkdir(parents=True, exist_ok=True)
    data = shared / "questions.jsonl"
    data.write_text("".join(json.dumps({"question": q}) + "\n" for q in QUESTIONS))
    runs_dir = root / "runs"
    root.mkdir(parents=True, exist_ok=True)
    config = {
        "models": ["mock:reliability"],
        "datasets": [str(data)],
        "n": len(QUESTIONS),
        "runs_dir": str(runs_dir),
        "generation": {"max_new_tokens": 8, "batch_size": 3},
        "analysis": {"batch_size": 3},
        "bertscore": {"model": "minilm-l6", "num_layers": 6, "semantic_threshold": 0.78},
        "orchestration": {"shard_size": 2},
        "variants": tiny_variants(strengths=(-4, 4)),
    }
    path = root / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@dataclass
class Outcome:
    pid: int
    returncode: int
    output: str
    committed_before: set[str] = field(default_factory=set)


class TargetProcesses:
    """Runs of ``target.py`` (or ``disk_target.py``), each in a new process forked from one
    that already imported sago and Prefect (``python -m tests.reliability.target serve``):
    one `sago run` on the fake backend, its own pid, killable, less the seconds of imports a
    fresh interpreter pays. Thread-safe: runs may overlap. Use as a context manager."""

    def __init__(self, env: dict[str, str]) -> None:
        self._server = subprocess.Popen(
            [sys.executable, "-m", "tests.reliability.target", "serve"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self._outputs = tempfile.TemporaryDirectory(prefix="sago-target-")
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._done = threading.Condition()
        self._replies: dict[str, dict[str, int]] = {}
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._server.stdout is not None
        for line in self._server.stdout:
            message = json.loads(line)
            with self._done:
                self._replies.setdefault(message["id"], {}).update(message)
                self._done.notify_all()
        with self._done:
            self._replies["closed"] = {}
            self._done.notify_all()

    def _wait(self, key: str, name: str) -> int:
        with self._done:
            while name not in self._replies.get(key, {}):
                if "closed" in self._replies:
                    raise RuntimeError(f"the fork server ended (exit {self._server.wait()})")
                self._done.wait()
            return self._replies[key][name]

    def spawn(
        self,
        module: str,
        argv: list[str],
        stderr_apart: bool = False,
        env: dict[str, str] | None = None,
    ) -> tuple[int, str, Path, Path]:
        """Start one run of ``tests.reliability.<module>`` with ``argv``: (pid, request id,
        the file of its stdout, that of its stderr, the same file unless ``stderr_apart``).
        ``env``: variables set in the run's process over the server's (another machine's
        scratch folder, a store's credentials); none that Prefect or the imports read."""
        key = str(next(self._ids))
        output = Path(self._outputs.name) / f"{key}.out"
        errors = output.with_suffix(".err") if stderr_apart else output
        output.write_bytes(b"")
        errors.write_bytes(b"")
        request: dict[str, object] = {"id": key, "module": f"tests.reliability.{module}"}
        request |= {"argv": argv, "output": str(output), "stderr": str(errors), "env": env or {}}
        assert self._server.stdin is not None
        with self._lock:
            self._server.stdin.write((json.dumps(request) + "\n").encode())
            self._server.stdin.flush()
        return self._wait(key, "pid"), key, output, errors

    def wait(self, key: str) -> int:
        """The return code of a spawned run (negative: killed by that signal)."""
        return self._wait(key, "returncode")

    def run(
        self,
        config: Path,
        calls: Path,
        kill: tuple[str, int] | None = None,
        env: dict[str, str] | None = None,
    ) -> Outcome:
        """One `sago run` of ``config`` on the fake backend, forked (``env``: as ``spawn``'s);
        ``kill``: (a point of ``target.POINTS``, n): SIGKILL itself the n-th time it gets there."""
        runs_dir = Path(yaml.safe_load(config.read_text())["runs_dir"])
        committed = committed_results(runs_dir)
        argv = [str(config), str(calls), *([kill[0], str(kill[1])] if kill else [])]
        return self.outcome(self.spawn("target", argv, env=env), committed)

    def outcome(
        self, spawned: tuple[int, str, Path, Path], committed: set[str] | None = None
    ) -> Outcome:
        """The outcome of a run ``spawn`` started, once it ended."""
        pid, key, output, _ = spawned
        code = self.wait(key)
        return Outcome(pid, code, output.read_text(errors="replace"), committed or set())

    def close(self) -> None:
        assert self._server.stdin is not None
        self._server.stdin.close()
        self._server.wait(timeout=600)
        self._reader.join(timeout=60)
        self._outputs.cleanup()

    def __enter__(self) -> TargetProcesses:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


_SHARED: dict[tuple[tuple[str, str], ...], TargetProcesses] = {}


def target_processes(env: dict[str, str]) -> TargetProcesses:
    """One ``TargetProcesses`` per environment for this whole pytest process (the modules of
    the suite share its imports), closed when the process exits."""
    key = tuple(sorted(env.items()))
    if key not in _SHARED:
        _SHARED[key] = TargetProcesses(env)
        atexit.register(_SHARED[key].close)
    return _SHARED[key]


def run_dirs(runs_dir: Path) -> list[Path]:
    return [p for p in runs_dir.iterdir() if p.is_dir() and not p.name.startswith(".")]


def committed_results(runs_dir: Path) -> set[str]:
    """Artifact paths (relative to their run folder) whose Prefect result record exists."""
    if not runs_dir.is_dir():
        return set()
    done = set()
    for run_dir in run_dirs(runs_dir):
        records = run_dir / ".prefect-results"
        for record in records.glob("*") if records.is_dir() else []:
            if record.is_file() and not record.name.startswith("."):
                path = json.loads(json.loads(record.read_bytes())["result"])
                if isinstance(path, str):  # not a failed task's exception record
                    done.add(str(Path(path).relative_to(run_dir)))
    return done


def shard_of_prompt(run_dir: Path) -> dict[str, str]:
    """Prompt text (base or variant) -> label of the shard that asks it."""
    owner = {}
    for shard in json.loads((run_dir / "shards" / "shards.json").read_text()):
        for text in pl.read_parquet(shard["prompts_path"])["prompt"]:
            owner[text] = shard["label"]
        for text in pl.read_parquet(shard["variants_path"])["text"]:
            owner[text] = shard["label"]
    return owner


def calls_by_process(calls: Path) -> dict[int, list[dict[str, str]]]:
    out: dict[int, list[dict[str, str]]] = {}
    if calls.exists():
        for line in calls.read_text().splitlines():
            call = json.loads(line)
            out.setdefault(call["pid"], []).append(call)
    return out


def manifest_problems(run_dir: Path) -> list[str]:
    """Every artifact the manifest lists exists with its recorded sha256 and row count."""
    problems = []
    for stage in json.loads((run_dir / "manifest.json").read_text())["stages"]:
        path = run_dir / stage["path"]
        if not path.exists():
            problems.append(f"{stage['path']}: missing")
            continue
        if sha256_of(path) != stage["sha256"]:
            problems.append(f"{stage['path']}: sha256 differs from the manifest")
        if stage["rows"] is not None and pq.read_metadata(path).num_rows != stage["rows"]:
            problems.append(f"{stage['path']}: row count differs from the manifest")
    return problems


def unreadable_parquet(root: Path) -> list[str]:
    bad = []
    for path in root.rglob("*.parquet"):
        try:
            pq.read_table(path)
        except Exception as exc:  # any failure to read is the finding
            bad.append(f"{path}: {exc}")
    return bad


def final_tables(run_dir: Path) -> dict[str, pl.DataFrame]:
    tables = {}
    for name in FINAL_TABLES:
        frame = pl.read_parquet(run_dir / f"{name}.parquet")
        tables[name] = frame.sort(frame.columns[: min(4, len(frame.columns))])
    return tables
