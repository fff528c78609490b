"""One `sago run` in this process, on a deterministic fake backend, that may SIGKILL itself.

    python -m tests.reliability.target CONFIG.yaml CALLS.jsonl [POINT HIT]

The fake backend answers from the prompt text alone (and a word-overlap F1 stands in for
BERTScore, so no scorer model loads) and appends one line per prompt it is
asked (generation or teacher-forced scoring) to CALLS.jsonl, with this process's id: the
call counter the harness reads across processes. With POINT and HIT the process sends
itself SIGKILL (no cleanup of any kind runs) the HIT-th time it reaches POINT:

    generation    inside a generation batch, after the backend was asked
    scoring       inside the teacher-forced pass or the BLEU scoring of pairs
    temp_written  an artifact's temp file is on disk, not yet renamed
    renamed       an artifact (or result record) was renamed, nothing after it ran
    statistics    inside the summary statistics (one t-test row at a time)
"""

from __future__ import annotations

import hashlib
import json
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


def answer(prompt: str) -> str:
    """Deterministic, prompt-dependent, a few words long."""
    words = [w.strip(".,!?;:").lower() for w in prompt.split()]
    words = [w for w in words if w][:6]
    return "The answer concerns " + " ".join(reversed(words)) + "."


class CountingFakeBackend:
    name = "fake"

    def __init__(self, calls: Path) -> None:
        self.calls = calls

    def _log(self, kind: str, prompts: Sequence[str]) -> None:
        lines = "".join(
            json.dumps({"pid": os.getpid(), "kind": kind, "prompt": p}) + "\n" for p in prompts
        )
        with self.calls.open("a", encoding="utf-8") as handle:
            handle.write(lines)
            handle.flush()
            os.fsync(handle.fileno())

    def generate(self, prompts: Sequence[str], max_new_tokens: int, batch_size: int) -> list:
        from sago_core.backends.protocol import Generation

        out = []
        for prompt in prompts:  # one prompt at a time: a kill lands inside the batch
            self._log("generate", [prompt])
            reach("generation")
            text = answer(prompt)
            out.append(Generation(text, tuple(range(len(text.split()))), "stop"))
        return out

    def score(self, requests: Sequence[Any], batch_size: int, max_batch_tokens: Any = None) -> list:
        import numpy as np

        from sago_core.backends.protocol import TeacherForced

        out = []
        for r in requests:
            self._log("score", [r.prompt])
            reach("scoring")
            seed = int.from_bytes(hashlib.sha256(r.prompt.encode()).digest()[:8], "little")
            rng = np.random.default_rng(seed)
            hidden = rng.normal(size=(2, 4)).astype(np.float32)
            n = len(r.response_token_ids)
            out.append(TeacherForced(hidden, float(-rng.random()), float(rng.random()), n))
        return out

    def encode_response(self, text: str) -> tuple[int, ...]:
        return tuple(range(len(text.split())))

    def prompt_lengths(self, prompts: Sequence[str]) -> list[int]:
        return [len(p.split()) for p in prompts]

    def context_window(self) -> None:
        return None

    def describe(self) -> dict[str, str]:
        return {"backend": self.name}


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


def install(calls: Path, runs_dir: Path) -> None:
    import sago_core.scoring.summary
    import sago_core.stages.pairs
    import tasks.metrics
    import tasks.models
    import tasks.prepare

    backend = CountingFakeBackend(calls)
    tasks.models.backend_for = lambda *args, **kwargs: backend  # type: ignore[assignment]
    scorer = WordOverlapScorer()
    tasks.metrics.get_bert_scorer = lambda *args, **kwargs: scorer  # type: ignore[assignment]
    tasks.prepare.get_bert_scorer = lambda *args, **kwargs: scorer  # type: ignore[assignment]
    sago_core.stages.pairs.sentence_bleu = _counted(  # type: ignore[assignment]
        sago_core.stages.pairs.sentence_bleu, "scoring"
    )
    sago_core.scoring.summary._row = _counted(  # type: ignore[assignment]
        sago_core.scoring.summary._row, "statistics"
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

    os.replace = replace  # type: ignore[assignment]


def main(argv: list[str]) -> int:
    global _plan
    config, calls = Path(argv[0]), Path(argv[1])
    if len(argv) == 4:
        assert argv[2] in POINTS, argv[2]
        _plan = (argv[2], int(argv[3]))
    from flows.cli import main as sago
    from sago_core.config import read_config_file

    install(calls, Path(read_config_file(config)["runs_dir"]))
    return sago(["run", "--config", str(config)])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
