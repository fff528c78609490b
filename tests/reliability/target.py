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
"""

from __future__ import annotations

import os
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
    import sago_core.scoring.summary
    import sago_core.stages.pairs
    import tasks.metrics
    import tasks.prepare
    from sago_core.backends.mock import CALLS_ENV, MockBackend

    os.environ[CALLS_ENV] = str(calls)
    MockBackend.observers.append(_observe)
    scorer = WordOverlapScorer()
    _patch(tasks.metrics, "get_bert_scorer", lambda *args, **kwargs: scorer)
    _patch(tasks.prepare, "get_bert_scorer", lambda *args, **kwargs: scorer)
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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
