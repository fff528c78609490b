"""``python -m bench.allocator``: the scoring pass's memory over one shard-sized call, with
glibc's dynamic mmap threshold (``SAGO_MALLOC_TUNING=0``, what every run had before sago set
the threshold itself) and with sago's fixed one (``sago_core/backends/allocator.py``).

Each side runs in a fresh process: the embedded model through the transformers backend,
then one ``score`` call over ROWS teacher-forced rows, as the analysis stage makes it
(default batch size and token cap, batches in ascending length, so the later batches are
the longer ones). Prompts are the built-in questions padded with a seeded number of words;
responses are seeded lengths of one passage's token ids (1-100 tokens, a third at the cap of
100, as the paper grid's answers were). RSS is read from /proc before the call (model loaded),
every 50 ms during it (peak) and after it; the table gives both sides and the ratio of their
growth over the call.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = "hf:smollm2-135m"
PASSAGE = (
    "The river rises in the northern hills and runs south through farmland and two old "
    "market towns before it reaches the sea. Its water was used for mills, then for "
    "canals, and today mostly for drinking water and for the boats of visitors who come "
    "in summer. The answer depends on where one measures, but most sources agree on the "
    "figure given in the survey, which counts every bend of the main channel. "
)
SIDES = {"dynamic threshold (glibc default)": "0", "fixed threshold (sago)": "1"}


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PeakRss:
    """The highest RSS seen every ``every_s`` seconds while open."""

    def __init__(self, every_s: float = 0.05) -> None:
        self.every_s, self.peak, self._stop = every_s, rss_bytes(), threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.wait(self.every_s):
            self.peak = max(self.peak, rss_bytes())

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_bytes())


def requests(backend: object, rows: int, seed: int) -> list:
    import numpy as np

    from sago_core.backends.protocol import ScoringRequest
    from sago_core.data.builtin import builtin_prompts

    rng = np.random.default_rng(seed)
    questions = [p.prompt for p in builtin_prompts()]
    passage = backend.encode_response(PASSAGE * 4)  # type: ignore[attr-defined]
    assert passage is not None and len(passage) >= 100
    out = []
    for i in range(rows):
        words = PASSAGE.split()[: int(rng.integers(0, 40))]
        prompt = f"{questions[i % len(questions)]} {' '.join(words)}".strip()
        n = 100 if rng.random() < 1 / 3 else int(rng.integers(1, 100))
        out.append(ScoringRequest(prompt, tuple(passage[:n])))
    return out


def measure(rows: int, seed: int) -> dict:
    """One side, in this process (the child)."""
    from sago_core.backends import allocator
    from sago_core.backends.factory import open_backend
    from sago_core.backends.target import model_target
    from sago_core.config import AnalysisSettings, RunConfig

    backend = open_backend(model_target(RunConfig(), MODEL))
    batch = requests(backend, rows, seed)
    settings = AnalysisSettings()
    before = rss_bytes()
    started = time.perf_counter()
    with PeakRss() as peak:
        scored = backend.score(batch, settings.batch_size, settings.max_batch_tokens)
    assert len(scored) == rows
    return {
        "before": before,
        "after": rss_bytes(),
        "peak": peak.peak,
        "seconds": time.perf_counter() - started,
        "tokens": sum(len(r.response_token_ids) for r in batch),
        "allocator": allocator.tune_heap(),
    }


def run_side(tuning: str, rows: int, seed: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_MMAP_THRESHOLD_"}
    env["SAGO_MALLOC_TUNING"] = tuning
    child = ["--child", "--rows", str(rows), "--seed", str(seed)]
    done = subprocess.run(
        [sys.executable, "-m", "bench.allocator", *child],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"bench.allocator child failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def table(results: dict[str, dict], rows: int) -> list[str]:
    gib = 1024**3
    lines = [
        f"scoring pass over {rows} rows ({MODEL}, one call, default batches): RSS in GB",
        "",
        "| allocator | before | after | growth | peak | seconds |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, r in results.items():
        lines.append(
            f"| {name} | {r['before'] / gib:.2f} | {r['after'] / gib:.2f} | "
            f"{(r['after'] - r['before']) / gib:+.2f} | {r['peak'] / gib:.2f} | "
            f"{r['seconds']:.0f} |"
        )
    dynamic, fixed = results.values()
    lines.append("")
    lines.append(f"sago's side: {fixed['allocator']}")
    lines.append(
        f"after the call, fixed / dynamic: {fixed['after'] / dynamic['after']:.2f}; "
        f"peak {fixed['peak'] / dynamic['peak']:.2f}; growth "
        f"{(fixed['after'] - fixed['before']) / gib:+.2f} vs "
        f"{(dynamic['after'] - dynamic['before']) / gib:+.2f} GB"
    )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.allocator", description=__doc__)
    parser.add_argument("--rows", type=int, default=600, help="teacher-forced rows (600)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--together", action="store_true", help="run both sides at once (their seconds shared)"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.rows, args.seed)), flush=True)
        return 0
    if not sys.platform.startswith("linux"):
        print("bench.allocator: RSS is read from /proc (Linux only); skipped")
        return 0
    if args.together:  # RSS is per process; the seconds then share the cores
        with ThreadPoolExecutor(len(SIDES)) as pool:
            futures = {n: pool.submit(run_side, t, args.rows, args.seed) for n, t in SIDES.items()}
        results = {name: future.result() for name, future in futures.items()}
    else:
        results = {name: run_side(tuning, args.rows, args.seed) for name, tuning in SIDES.items()}
    print("\n".join(table(results, args.rows)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
