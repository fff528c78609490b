"""``python -m bench.shard_idle``: how long each of two workers idles while the other still
generates one model's shards, under two shard plans: contiguous groups and per-worker cuts.

Each arm is one model's shard stage as a multi-device run serves it: one local worker
process per device (``flows.runtime.dispatch.serve_group``: CUDA_VISIBLE_DEVICES set, the
engine built once, the group served by the `sago-shard` flow reporting to this Prefect API).
The arms differ only in the plan:

- ``before``: the one-worker cut (every ``shard_size`` prompts of a dataset), dealt out in
  contiguous even groups (the dispatcher's former grouping, kept as the baseline);
- ``after``: the dispatcher's plan since then, ``sago_core.stages.shards`` with the workers
  counted (each shard cut into one part per worker, every worker given its share of every
  dataset, longest first).

The ratios printed (after/before: span, wall, busy seconds) compare the two arms of the
same run, on the same machine under the same load; no threshold is asserted.

The model is ``mock:paced``: the mock backend, slowed in the worker by a pace that stands
for an engine (``Pace``): a start-up paid once per worker, then per prompt text its prompt
tokens at ``prefill_s`` and its answer's tokens at ``decode_s`` (1/5,800 s: vLLM's published
offline rate for an 8B model on one H100), and the scoring pass's tokens
at ``prefill_s``. Waiting, not computing, so the arms measure the plan, not the load other
processes put on this machine's cores. What no plan knows is how long answers run; with
``--lengths dataset`` (default) each dataset has its own typical answer length (a share of
``max_new_tokens``, ``ANSWER_SHARE``: an assumption of this bench, chosen from the kind of
question, not measured), each prompt text +-30% around it; ``--lengths even`` gives every
dataset the same share, so only the prompts' lengths and the variant counts differ.

From each shard's ``worker.json`` (the worker's queue, and when it began and ended the shard:
``flows/shard.py``), per worker: its busy seconds within the span from the first shard's
start to the last shard's end, and its idle share of that span (target < 10%): ``late``
before its first shard, ``tail`` after its last. Beside it, what the plan alone decides: the
paced engine's seconds per worker (``engine_seconds``) and the idle share they leave; and
what is neither: sago's own seconds per shard outside the engine (``sago s/shard``: busy
minus the paced engine's seconds, its start-up included; task runs, cache keys, hashing,
Parquet), and their mean over the arm's shards.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PACE_ENV = "SAGO_BENCH_PACE"
MODEL = "mock:paced"
DECODE_S = 1 / 5800
# What a dataset's answers run to, as a share of max_new_tokens (``--lengths dataset``):
# instructions to the cap, explanations most of it, short-answer questions a few words.
ANSWER_SHARE = {
    "alpaca": 1.0,
    "truthfulqa": 0.6,
    "hotpotqa": 0.3,
    "simpleqa_verified": 0.3,
    "nq_open": 0.2,
    "triviaqa": 0.2,
}
EVEN_SHARE = 0.5  # --lengths even; also a dataset not in ANSWER_SHARE


@dataclass(frozen=True)
class Pace:
    """The paced engine's costs (seconds) and its answer lengths."""

    start_s: float = 3.0
    decode_s: float = DECODE_S
    prefill_s: float = DECODE_S / 10
    lengths: str = "dataset"  # or "even"

    def answer_tokens(self, text: str, dataset: str, max_new_tokens: int) -> int:
        share = ANSWER_SHARE.get(dataset, EVEN_SHARE) if self.lengths == "dataset" else EVEN_SHARE
        digest = hashlib.sha256(text.encode()).digest()
        jitter = 0.7 + 0.6 * int.from_bytes(digest[:4], "little") / 2**32
        return max(1, min(max_new_tokens, round(share * jitter * max_new_tokens)))


def engine_seconds(pace: Pace, max_new_tokens: int, prompts_path: str, variants_path: str) -> float:
    """What the paced engine waits for one shard (start-up not included): the seconds of its
    generation and scoring pass, from its inputs."""
    import polars as pl

    prompts = pl.read_parquet(prompts_path, columns=["dataset", "prompt"])
    variants = pl.read_parquet(variants_path, columns=["dataset", "text", "kept"])
    texts = list(prompts.rows()) + [(d, t) for d, t, k in variants.rows() if k]
    seconds = 0.0
    for dataset, text in texts:
        answer = pace.answer_tokens(text, dataset, max_new_tokens)
        prompt_tokens = -(-len(text) // 4)
        seconds += prompt_tokens * pace.prefill_s + answer * pace.decode_s  # generation
        seconds += (prompt_tokens + answer) * pace.prefill_s  # the scoring pass
    return seconds


class Pacer:
    """A ``MockBackend`` observer that waits what the paced engine would take per prompt."""

    def __init__(self, pace: Pace, max_new_tokens: int, dataset_of: dict[str, str]) -> None:
        self.pace, self.max_new_tokens, self.dataset_of = pace, max_new_tokens, dataset_of
        self.started = False

    def __call__(self, kind: str, prompt: str) -> None:
        if not self.started:
            time.sleep(self.pace.start_s)
            self.started = True
        dataset = self.dataset_of.get(prompt, "")
        answer = self.pace.answer_tokens(prompt, dataset, self.max_new_tokens)
        prompt_tokens = -(-len(prompt) // 4)
        if kind == "generate":
            time.sleep(prompt_tokens * self.pace.prefill_s + answer * self.pace.decode_s)
        else:  # the scoring pass: prompt and answer teacher-forced
            time.sleep((prompt_tokens + answer) * self.pace.prefill_s)


def paced_shard_flow(
    config: Any, model: str, target: Any, shards: list[dict], run_dir: str, device_queue: str
) -> list[str]:
    """The `sago-shard` flow in a device worker, with the mock backend paced (``Pace`` from
    ``SAGO_BENCH_PACE``); ``flows.runtime.device_worker`` calls it as it would the flow."""
    import polars as pl

    from sago.flows.shard import shard_flow
    from sago_core.backends.mock import MockBackend

    pace = Pace(**json.loads(os.environ.get(PACE_ENV, "{}")))
    dataset_of: dict[str, str] = {}
    for shard in shards:
        for path, column in ((shard["prompts_path"], "prompt"), (shard["variants_path"], "text")):
            frame = pl.read_parquet(path, columns=["dataset", column])
            dataset_of.update(zip(frame[column].to_list(), frame["dataset"].to_list(), strict=True))
    MockBackend.observers.append(Pacer(pace, config.generation.max_new_tokens, dataset_of))
    return list(shard_flow(config, model, target, shards, run_dir, device_queue=device_queue))


def contiguous_groups(shards: list[Any], workers: int) -> list[list[Any]]:
    """The dispatcher's former grouping, the baseline (once ``device_groups`` in
    flows/runtime/dispatch.py): contiguous, even by count, empty groups dropped."""
    size = -(-len(shards) // max(workers, 1))
    return [shards[i : i + size] for i in range(0, len(shards), size)] if shards else []


@dataclass(frozen=True)
class WorkerTime:
    queue: str
    shards: int
    busy_s: float
    idle_s: float
    idle_share: float
    late_s: float  # of the idle: before its first shard (the worker's start, later than another's)
    tail_s: float  # of the idle: after its last shard, while another worker still ran
    engine_s: float  # what the paced engine waited for its shards and its start-up
    planned_idle: float | None  # the plan's estimate (its shards' tokens); None: not known


@dataclass(frozen=True)
class Arm:
    name: str
    shards: int
    wall_s: float  # from starting the workers to both finished
    span_s: float  # first shard start to last shard end
    workers: list[WorkerTime]
    cached: int  # shards a worker found cached (0 in a fair arm)


def planned_idle(loads: list[list[int]]) -> list[float]:
    """Per worker (its shards' estimated loads), the share of the heaviest worker's load it
    would idle: 1 - its load / the heaviest's."""
    carried = [sum(group) for group in loads]
    heaviest = max(carried, default=0)
    return [1.0 - c / heaviest if heaviest > 0 else 0.0 for c in carried]


def worker_times(records: list[dict], planned: dict[str, float]) -> tuple[float, list[WorkerTime]]:
    """Per worker (queue) of one model's shard records (``worker.json``, plus ``engine_s``):
    busy and idle seconds within the span of the whole model's generation, and the idle
    share of that span."""
    begin = min(r["started_at"] for r in records)
    end = max(r["ended_at"] for r in records)
    span = end - begin
    rows = []
    for queue in sorted({r["queue"] for r in records}):
        mine = sorted((r["started_at"], r["ended_at"]) for r in records if r["queue"] == queue)
        busy, reach = 0.0, begin
        for start, stop in mine:  # union of intervals (a worker serves one at a time)
            busy += max(0.0, stop - max(start, reach))
            reach = max(reach, stop)
        idle, late, tail = span - busy, mine[0][0] - begin, end - reach
        share = idle / span
        engine = sum(r.get("engine_s", 0.0) for r in records if r["queue"] == queue)
        rows.append(
            WorkerTime(queue, len(mine), busy, idle, share, late, tail, engine, planned.get(queue))
        )
    return span, rows


def run_arm(
    name: str,
    config: Any,
    prompts: Any,
    variants: Any,
    workers: int,
    plan: Callable[[Any, Any, Any, Path], list[list[Any]]],
) -> Arm:
    """One model's shards through ``workers`` local device workers under ``plan``."""
    from sago.flows.runtime.devices import worker_devices
    from sago.flows.runtime.dispatch import ShardWork, serve_group
    from sago.flows.runtime.stage_runner import StageRunner
    from sago.flows.shard import run_shard
    from sago_core.artifacts.layout import SHARD_WORKER_FILE, RunLayout
    from sago_core.backends.target import model_target
    from sago_core.stages.shards import shard_load

    layout = RunLayout.of(config.runs_dir, config.resolved_run_id())
    groups = plan(config, prompts, variants, layout.shards)
    devices = worker_devices(workers)
    stage = StageRunner(layout, storage_name=f"sago-results-bench-{name}")
    target = model_target(config, config.models[0])
    work = ShardWork(run_one=run_shard, worker_flow="bench.shard_idle:paced_shard_flow")
    problems: list[str] = []

    def serve(index: int, group: list[Any]) -> None:
        problem = serve_group(stage, config, target, group, index, devices[index], work)
        if problem:
            problems.append(problem)

    threads = [threading.Thread(target=serve, args=(i, g)) for i, g in enumerate(groups)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    if problems:
        raise SystemExit(f"arm {name}: {'; '.join(problems)}")
    prefix = config.orchestration.queue_prefix
    max_new = config.generation.max_new_tokens
    estimate = planned_idle([[shard_load(s, max_new) or 0 for s in g] for g in groups])
    planned = {f"{prefix}{i}": share for i, share in enumerate(estimate)}
    pace = Pace(**json.loads(os.environ.get(PACE_ENV, "{}")))
    records = [
        {
            **json.loads((layout.shard_dir(target.spec, s.label) / SHARD_WORKER_FILE).read_text()),
            "engine_s": engine_seconds(pace, max_new, s.prompts_path, s.variants_path),
        }
        for group in groups
        for s in group
    ]
    for queue in {r["queue"] for r in records}:  # the engine starts in a worker's first shard
        first = min((r for r in records if r["queue"] == queue), key=lambda r: r["started_at"])
        first["engine_s"] += pace.start_s
    span, rows = worker_times(records, planned)
    for i in range(len(groups), workers):  # a worker given no shard idles the whole span
        rows.append(WorkerTime(f"{prefix}{i}", 0, 0.0, span, 1.0, 0.0, span, 0.0, 1.0))
    cached = sum(bool(r.get("cached")) for r in records)
    return Arm(name, sum(len(g) for g in groups), wall, span, rows, cached)


def plan_before(workers: int) -> Callable[[Any, Any, Any, Path], list[list[Any]]]:
    def plan(config: Any, prompts: Any, variants: Any, out_dir: Path) -> list[list[Any]]:
        from sago_core.stages.shards import read_shards, write_shards

        size = config.orchestration.shard_size
        shards = read_shards(write_shards(prompts, variants, size, out_dir))
        return contiguous_groups(shards, workers)

    return plan


def plan_after(workers: int) -> Callable[[Any, Any, Any, Path], list[list[Any]]]:
    def plan(config: Any, prompts: Any, variants: Any, out_dir: Path) -> list[list[Any]]:
        from sago_core.stages.shards import assign_shards, read_shards, write_shards

        size = config.orchestration.shard_size
        shards = read_shards(write_shards(prompts, variants, size, out_dir, workers))
        return assign_shards(shards, workers, config.generation.max_new_tokens)

    return plan


def table(arms: list[Arm]) -> list[str]:
    head = (
        f"{'arm':<8}{'shards':>7}{'wall s':>8}{'span s':>8}  {'worker':<10}{'shards':>7}"
        f"{'busy s':>8}{'idle s':>8}{'late s':>8}{'tail s':>8}{'idle':>7}{'planned':>9}"
        f"{'engine s':>10}{'engine idle':>13}{'sago s/shard':>14}"
    )
    lines = [head]
    for arm in arms:
        heaviest = max(w.engine_s for w in arm.workers)
        for i, w in enumerate(arm.workers):
            other = (w.busy_s - w.engine_s) / w.shards if w.shards else None
            left = (
                f"{arm.name:<8}{arm.shards:>7}{arm.wall_s:>8.1f}{arm.span_s:>8.1f}"
                if i == 0
                else " " * 31
            )
            lines.append(
                f"{left}  {w.queue:<10}{w.shards:>7}{w.busy_s:>8.1f}{w.idle_s:>8.1f}"
                f"{w.late_s:>8.1f}{w.tail_s:>8.1f}{100 * w.idle_share:>6.1f}%"
                f"{percent(w.planned_idle):>9}{w.engine_s:>10.1f}"
                f"{percent(1 - w.engine_s / heaviest if heaviest else None):>13}"
                f"{'NA' if other is None else f'{other:.2f}':>14}"
            )
    return lines


def percent(share: float | None) -> str:
    return "NA" if share is None else f"{100 * share:.1f}%"


def sago_per_shard(arm: Arm) -> float | None:
    """sago's seconds per shard outside the engine, over all of the arm's shards."""
    shards = sum(w.shards for w in arm.workers)
    return sum(w.busy_s - w.engine_s for w in arm.workers) / shards if shards else None


def verdict(arms: list[Arm]) -> list[str]:
    lines = []
    for arm in arms:
        worst = max(w.idle_share for w in arm.workers)
        mark = "meets" if worst < 0.10 else "misses"
        per_shard = sago_per_shard(arm)
        lines.append(
            f"{arm.name}: largest idle share {100 * worst:.1f}% ({mark} < 10%); sago outside "
            f"the engine {'NA' if per_shard is None else f'{per_shard:.2f}'} s per shard"
        )
    if len(arms) == 2 and arms[0].span_s > 0:
        before, after = arms
        lines.append(
            f"{after.name}/{before.name}: span {after.span_s / before.span_s:.3f}, wall "
            f"{after.wall_s / before.wall_s:.3f}, busy seconds (all workers) "
            f"{sum(w.busy_s for w in after.workers) / sum(w.busy_s for w in before.workers):.3f}"
        )
    if any(arm.cached for arm in arms):
        lines.append("warning: some shards were cached; those arms measured no generation")
    return lines


def workload(args: argparse.Namespace, runs_dir: Path) -> tuple[Any, Any, Any]:
    """The config (paper preset, paced mock, ``--n`` prompts of each dataset), its prompts
    and its variant candidates, every one kept (no semantic filter: it does not change
    what the plan is asked, only how many variants)."""
    from sago_core.config import DATASET_NAMES, build_config
    from sago_core.stages.prompts import prepare_prompts
    from sago_core.stages.variants import build_variant_candidates

    config = build_config(
        "paper",
        {
            "models": [MODEL],
            "datasets": list(args.datasets or DATASET_NAMES),
            "data_dir": str(args.data_dir),
            "n": args.n,
            "runs_dir": str(runs_dir),
            "generation": {"max_new_tokens": args.max_new_tokens},
            "variants": {"structural": None},
            "orchestration": {"devices": args.workers, "shard_size": args.shard_size},
        },
    )
    prompts = prepare_prompts(config)
    return config, prompts, build_variant_candidates(prompts, config.variants, config.seed)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.shard_idle", description=__doc__)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--n", type=int, default=8, help="prompts of each dataset")
    parser.add_argument("--datasets", nargs="*", help="default: the paper's six")
    parser.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--max-new-tokens", type=int, default=100)
    parser.add_argument("--shard-size", type=int, default=32)
    parser.add_argument("--lengths", choices=("dataset", "even"), default="dataset")
    parser.add_argument("--start-s", type=float, default=3.0, help="engine start per worker")
    parser.add_argument(
        "--decode-ms",
        type=float,
        default=1000 * DECODE_S,
        help="per answer token (default: the H100 anchor; ~1 for the embedded model on CPU)",
    )
    parser.add_argument("--workdir", type=Path, help="keep the runs here (default: temp)")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="sago-shard-idle-"))
    (workdir / "prefect").mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PREFECT_HOME", str(workdir / "prefect"))
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "900")
    decode = args.decode_ms / 1000
    pace = Pace(args.start_s, decode, decode / 10, args.lengths)
    os.environ[PACE_ENV] = json.dumps(asdict(pace))
    arms: list[Arm] = []
    for name, plan in (("before", plan_before), ("after", plan_after)):
        config, prompts, variants = workload(args, workdir / name)
        if not arms:
            print(
                f"{prompts.height} prompts, {variants.height} variants, {args.workers} workers, "
                f"max_new_tokens {args.max_new_tokens}, answer lengths by {args.lengths}, "
                f"engine start {args.start_s:.1f} s, {args.decode_ms:.3f} ms per answer token; "
                f"runs in {workdir}",
                flush=True,
            )
        arms.append(run_arm(name, config, prompts, variants, args.workers, plan(args.workers)))
    print("\n".join(["", *table(arms), "", *verdict(arms)]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
