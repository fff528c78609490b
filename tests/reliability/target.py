"""One `sago run` in this process, on the deterministic ``mock:`` backend, that may SIGKILL
itself.

    python -m tests.reliability.target CONFIG.yaml CALLS.jsonl [POINT HIT]

The mock backend answers from the prompt text alone (and a word-overlap F1 stands in for
BERTScore, so no scorer model loads) and appends one line per prompt it is asked
(generation or teacher-forced scoring) to CALLS.jsonl, with this process's id: the call
counter the harness reads across processes. With POINT and HIT the process sends
itself SIGKILL (no cleanup of any kind runs) the HIT-th time it reaches POINT:

    generation    inside a generation batch, after the backend was asked
    scoring       inside the teacher-forced pass or the BLEU scoring of pairs
    temp_written  an artifact's temp file is on disk, not yet renamed
    renamed       an artifact (or result record) was renamed, nothing after it ran
    statistics    inside the summary statistics (one t-test row at a time)

    python -m tests.reliability.target serve

A fork server (``harness.TargetProcesses``): imports sago, Prefect and the stage modules and
digests the stage code once, then forks one new process per run it is asked for (a run of
this module or of ``disk_target.py``). Each run is its own process, with its own pid, that
may be SIGKILLed like any other; it only skips the seconds of imports every fresh
interpreter pays. Protocol, one JSON line each way: ``{"id", "module", "argv", "output"}`` (and
optionally ``"stderr"``, else both streams go to ``output``, and ``"env"``, variables set in
the run's process) in; ``{"id", "pid"}`` once
forked, ``{"id", "returncode"}`` once reaped (negative: killed by that signal).
"""

from __future__ import annotations

import importlib
import json
import os
import select
import signal
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

POINTS = ("generation", "scoring", "temp_written", "renamed", "statistics")
_hits: Counter[str] = Counter()
_plan: tuple[str, int] | None = None


def reach(point: str) -> None:
    _hits[point] += 1
    if _plan is not None and _plan == (point, _hits[point]):
        os.kill(os.getpid(), signal.SIGKILL)


class WordOverlapScorer:
    """Stands in for BERTScore (F1 of word overlap): keeps each run a few seconds long."""

    def f1(self, candidates: Sequence[str], references: Sequence[str]) -> list[float]:
        reach("scoring")
        out = []
        for cand, ref in zip(candidates, references, strict=True):
            a, b = set(cand.lower().split()), set(ref.lower().split())
            out.append(2 * len(a & b) / (len(a) + len(b)) if a and b else float(a == b))
        return out


def _counted(fn: Callable[..., Any], point: str) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        reach(point)
        return fn(*args, **kwargs)

    return wrapper


def _patch(module: Any, name: str, value: Any) -> None:
    """Replace ``module.name``, refusing a name the module lacks: after a rename this fails
    loudly instead of silently testing nothing."""
    if not hasattr(module, name):
        raise AttributeError(f"{module.__name__} has no {name!r}: the harness is out of date")
    setattr(module, name, value)


def _observe(kind: str, prompt: str) -> None:
    reach("generation" if kind == "generate" else "scoring")


def install(calls: Path, runs_dir: Path) -> None:
    """The backend is ``mock:`` (chosen by the config, its calls logged to ``calls``); the
    kill points hook into its observers, the scorer, BLEU, the statistics and renames."""
    import sago.tasks.metrics
    import sago.tasks.prepare
    import sago_core.scoring.summary
    import sago_core.stages.pairs
    from sago_core.backends.mock import CALLS_ENV, MockBackend

    os.environ[CALLS_ENV] = str(calls)
    MockBackend.observers.append(_observe)
    scorer = WordOverlapScorer()
    _patch(sago.tasks.metrics, "get_bert_scorer", lambda *args, **kwargs: scorer)
    _patch(sago.tasks.prepare, "get_bert_scorer", lambda *args, **kwargs: scorer)
    _patch(
        sago_core.stages.pairs,
        "sentence_bleu",
        _counted(sago_core.stages.pairs.sentence_bleu, "scoring"),
    )
    _patch(
        sago_core.scoring.summary, "_row", _counted(sago_core.scoring.summary._row, "statistics")
    )
    real_replace = os.replace
    root = str(runs_dir.resolve())

    def replace(src: Any, dst: Any, **kwargs: Any) -> None:
        ours = str(src).endswith(".tmp") and str(dst).startswith(root)
        if ours:
            reach("temp_written")
        real_replace(src, dst, **kwargs)
        if ours:
            reach("renamed")

    _patch(os, "replace", replace)


def main(argv: list[str]) -> int:
    global _plan
    if argv[0] == "resume":  # resume RUN CALLS: `sago resume RUN` (a folder or its URL)
        from sago_cli.main import main as sago
        from sago_core.storage.location import is_url, parse_store_url

        run = argv[1]
        runs = parse_store_url(run).parent().scratch() if is_url(run) else Path(run).parent
        install(Path(argv[2]), runs)
        return sago(["resume", run])
    config, calls = Path(argv[0]), Path(argv[1])
    if len(argv) == 4:
        assert argv[2] in POINTS, argv[2]
        _plan = (argv[2], int(argv[3]))
    from sago_cli.main import main as sago
    from sago_core.config import read_config_file
    from sago_core.storage.location import is_url, parse_store_url

    runs_dir = str(read_config_file(config)["runs_dir"])  # a store's: this machine's scratch
    install(calls, parse_store_url(runs_dir).scratch() if is_url(runs_dir) else Path(runs_dir))
    return sago(["run", "--config", str(config)])


WARM = (
    "matplotlib.pyplot",
    "sago.flows.evaluate",
    "sago_cli.main",
    "sago_core.backends.mock",
    "sago_core.config",
    "sago_core.scoring.summary",
    "sago_core.stages.pairs",
    "sago_core.storage.location",
    "sago.tasks.metrics",
    "sago.tasks.prepare",
    "tests.reliability.disk_target",
)


def _warm() -> None:
    """What every run imports, and the stage code's digests (a pure function of the
    sources, cached per process): done once, before any fork."""
    import matplotlib

    matplotlib.use("Agg")
    for name in WARM:
        importlib.import_module(name)
    from sago.tasks.caching import code_version

    for name in sorted(m for m in sys.modules if m.startswith("sago.tasks.")):
        code_version(name)


def _child(request: dict[str, Any], wakeup: tuple[int, int]) -> None:
    """In the forked process: a fresh run's stdin, stdout/stderr and signals, then the run;
    its exit (SystemExit, an uncaught exception, a signal) ends this process as it would a
    fresh interpreter (threads joined, exit handlers run)."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for fd in wakeup:
        os.close(fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    for fd, path in ((1, request["output"]), (2, request.get("stderr", request["output"]))):
        opened = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(opened, fd)
        os.close(opened)
    os.environ.update(request.get("env") or {})
    module = importlib.import_module(request["module"])
    sys.argv = [str(module.__file__), *request["argv"]]
    sys.exit(module.main(request["argv"]))


def serve() -> int:
    """The fork server's loop (single-threaded, so a fork copies no held lock)."""
    _warm()
    wakeup = os.pipe()
    for fd in wakeup:
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(wakeup[1])
    signal.signal(signal.SIGCHLD, lambda *_: None)
    running: dict[int, str] = {}
    pending, closed = b"", False

    def reply(message: dict[str, Any]) -> None:
        os.write(1, (json.dumps(message) + "\n").encode())

    while not closed or running:
        readable, _, _ = select.select([wakeup[0]] if closed else [0, wakeup[0]], [], [])
        if wakeup[0] in readable:
            while True:
                try:
                    if not os.read(wakeup[0], 512):
                        break
                except BlockingIOError:
                    break
        while running:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            reply({"id": running.pop(pid), "returncode": os.waitstatus_to_exitcode(status)})
        if 0 in readable:
            chunk = os.read(0, 65536)
            closed = not chunk
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                request = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    _child(request, wakeup)  # never returns
                running[pid] = request["id"]
                reply({"id": request["id"], "pid": pid})
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["serve"]:
        sys.exit(serve())
    sys.exit(main(sys.argv[1:]))
