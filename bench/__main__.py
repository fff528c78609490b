"""``python -m bench``: naive vs sago on one workload, a scale curve, and a cached rerun.

Order: (1) both pipelines on the same workload, each in its own subprocess; (2) check they
agree (identical responses, deltas within tolerance) and stop if not; (3) the ratio table;
(4) sago at 1x, 2x, 4x the prompts: time exponent and peak memory; (5) the cost per sample
at T > 0, K = 1 vs K = 4 (``bench/sampling.py``), and vLLM's speed-up from sharing a prompt's
prefix across its K samples (``bench/sampling_vllm.py``; one line saying why it is skipped
without the vLLM environment); (6) the post-scoring stages on a synthetic paper-grid run at
1,000-8,000 instances (``bench/report_scale.py``: seconds, exponent, report.html bytes);
(7) the main job (``sago run --preset demo``) twice: rerun time over first-run time; (8) the
budgeted design's validation replay (``bench/budget.py``) on a synthetic paper grid, the
same at 8, 48 and 200 prompts per dataset (``bench/budget_scale.py``: coverage, bias and
false verdicts both ways as the prompt set grows; again on grids drawn from the recorded
real full run's cells when one is recorded), and a recorded real budgeted run beside
its full run (``bench/budget_real.py``), when one is; (9) budgeted runs with the last release
as a control variate beside the plain design (``bench/budget_baseline.py``).
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.budget import main as budget_replay
from bench.budget_baseline import main as budget_baseline
from bench.budget_real import ROOT as BUDGET_ROOT
from bench.budget_real import main as budget_real
from bench.budget_scale import main as budget_scale
from bench.pipelines import agree, compare, run_pipeline, tolerances
from bench.report_scale import main as report_scale
from bench.sampling import sampling_costs
from bench.sampling_vllm import vllm_sampling_costs
from bench.workload import Workload

STAGES = ("load", "generation", "analysis", "metrics")


def table(naive: dict, fast: dict) -> list[str]:
    lines = [f"{'stage':<12}{'naive s':>10}{'sago s':>10}{'speed-up':>10}{'sago/naive':>12}"]
    for stage in (*STAGES, "end to end"):
        if stage == "end to end":
            a, b = sum(naive["seconds"].values()), sum(fast["seconds"].values())
        else:
            a, b = naive["seconds"].get(stage, 0.0), fast["seconds"].get(stage, 0.0)
        lines.append(f"{stage:<12}{a:>10.1f}{b:>10.1f}{a / b:>9.1f}x{b / a:>12.3f}")
    lines += insight_costs(fast)
    lines += locate_costs(fast)
    for name, res in (("naive", naive), ("sago", fast)):
        total = sum(res["seconds"].values())
        gen = res["seconds"]["generation"]
        load_share = 100 * res["seconds"]["load"] / total
        lines.append(
            f"{name}: {res['tokens'] / gen:.1f} generated tokens/s, peak RSS "
            f"{res['peak_rss_mib']:.0f} MiB, model loading {load_share:.0f}% of its time"
        )
    return lines


def insight_costs(fast: dict) -> list[str]:
    """The beyond-the-mean stages (sago only, not in the end-to-end ratio)."""
    seconds = fast.get("insights_seconds") or {}
    if not seconds:
        return []
    parts = ", ".join(f"{stage} {t:.2f} s" for stage, t in seconds.items())
    return [f"sago insights over {fast.get('instances', 0)} variants: {parts}"]


def locate_costs(fast: dict) -> list[str]:
    """Layer profiles and activation patching (sago only): time per (variant, layer)."""
    seconds = fast.get("locate_seconds") or {}
    forwards = fast.get("patched_forwards") or 0
    if not seconds:
        return []
    line = f"sago locate: layer profiles {seconds.get('layer profiles', 0.0):.2f} s"
    if forwards:
        per = seconds.get("patching", 0.0) / forwards
        line += (
            f", patching {fast.get('patched_variants', 0)} variants x layers = {forwards} "
            f"forwards in {seconds.get('patching', 0.0):.1f} s ({1000 * per:.0f} ms per "
            "(variant, layer), the unpatched references included)"
        )
    return [line]


def scale_curve(root: Workload, multipliers: list[int], workdir: Path) -> list[str]:
    points = []
    for m in multipliers:
        folder = workdir / f"scale-{m}x"
        limit = None if root.limit is None else root.limit * m
        Workload(root.n * m, root.max_new_tokens, root.seed, limit, root.per_family).save(folder)
        res = run_pipeline("bench.fast", folder)
        work = sum(v for k, v in res["seconds"].items() if k != "load")
        points.append((m, res["rows"], work, res["peak_rss_mib"], peak_stage(res)))
    lines = [f"{'size':<6}{'rows':>6}{'stage s':>10}{'peak RSS MiB':>14}  peak reached in"]
    lines += [
        f"{m}x{'':<4}{rows:>6}{t:>10.1f}{rss:>14.0f}  {stage}" for m, rows, t, rss, stage in points
    ]
    if len(points) < 2:
        return lines
    x = np.log([p[1] for p in points])
    y = np.log([p[2] for p in points])
    exponent = float(np.polyfit(x, y, 1)[0])
    growth = points[-1][3] / points[0][3] - 1
    lines.append(f"time exponent (log-log fit): {exponent:.2f}  (target <= 1.1)")
    lines.append(
        f"peak memory at {multipliers[-1]}x vs 1x: {100 * growth:+.1f}%  (target within 20%)"
    )
    return lines


def peak_stage(res: dict) -> str:
    """The first stage by the end of which the process had reached its peak RSS ("load":
    loading the model and the scorer)."""
    after = res.get("peak_after_mib") or {}
    return next((k for k, v in after.items() if v >= res["peak_rss_mib"]), "NA")


def cached_rerun(workdir: Path) -> list[str]:
    runs = workdir / "runs"
    command = [
        sys.executable,
        "-m",
        "sago_cli",
        "run",
        "--preset",
        "demo",
        "--runs-dir",
        str(runs),
    ]
    env = {
        **os.environ,
        "PREFECT_HOME": str(workdir / "prefect"),
        "PREFECT_LOGGING_LEVEL": "WARNING",
    }
    times = []
    for _ in range(2):
        started = time.perf_counter()
        subprocess.run(
            command, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        times.append(time.perf_counter() - started)
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir() and not p.name.startswith(".")]
    verified, seconds = verification_cost(run_dir)
    return [
        f"main job (sago run --preset demo): first {times[0]:.1f} s, rerun {times[1]:.1f} s "
        f"= {100 * times[1] / times[0]:.1f}% of the first  (target <= 5%)",
        f"cache-hit verification ({verified} artifacts re-hashed against their recorded "
        f"sha256): {seconds:.3f} s = {100 * seconds / times[1]:.2f}% of the cached rerun; "
        f"rerun without it {times[1] - seconds:.1f} s, ratio with/without "
        f"{times[1] / (times[1] - seconds):.3f}",
    ]


def verification_cost(run_dir: Path) -> tuple[int, float]:
    """The work a fully cached rerun spends verifying its hits, done again and timed: read
    each stage's recorded checksum, hash its artifact, compare (flows/runtime/stage_runner)."""
    import json

    from sago_core.artifacts.layout import RunLayout
    from sago_core.artifacts.store import sha256_of

    layout = RunLayout(run_dir)
    started = time.perf_counter()
    records = sorted(layout.checksums.glob("*.json"))
    for record in records:
        entry = json.loads(record.read_text(encoding="utf-8"))
        if sha256_of(run_dir / entry["path"]) != entry["sha256"]:
            raise RuntimeError(f"{entry['path']}: does not match its recorded sha256")
    return len(records), time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--n", type=int, default=1, help="prompts per built-in style (1x size)")
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--prompts", type=int, help="keep only the first N prompts (smoke run)")
    parser.add_argument("--per-family", type=int, help="keep N variants per family and prompt")
    parser.add_argument("--scale", default="1,2,4", help="multipliers for the scale curve")
    parser.add_argument("--skip-rerun", action="store_true", help="skip the main-job rerun")
    parser.add_argument(
        "--skip-sampling", action="store_true", help="skip the cost per sample at T > 0"
    )
    parser.add_argument(
        "--skip-vllm", action="store_true", help="skip vLLM's prefix-cache speed-up at T > 0"
    )
    parser.add_argument(
        "--skip-report-scale",
        action="store_true",
        help="skip the post-scoring stages at 1,000-8,000 instances",
    )
    parser.add_argument("--workdir", type=Path, help="keep artifacts here (default: temp)")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="sago-bench-"))
    workload = Workload(args.n, args.max_new_tokens, limit=args.prompts, per_family=args.per_family)
    workload.save(workdir)
    print(
        f"workload: {args.n} prompt(s) per built-in style, max_new_tokens "
        f"{args.max_new_tokens}, artifacts in {workdir}",
        flush=True,
    )
    naive = run_pipeline("bench.naive", workdir)
    fast = run_pipeline("bench.fast", workdir)
    share, worst = compare(workdir)
    print(f"identical responses: {100 * share:.1f}%")
    print(
        "max |delta naive - delta sago| per axis: "
        + ", ".join(f"{a}={worst.get(a, math.nan):.2e}" for a in tolerances())
    )
    if not agree(share, worst):
        print("the two pipelines disagree: no speed is reported", file=sys.stderr)
        return 1
    print("\n".join(["", *table(naive, fast), ""]), flush=True)
    multipliers = [int(m) for m in args.scale.split(",")]
    print("\n".join([*scale_curve(workload, multipliers, workdir), ""]), flush=True)
    if not args.skip_sampling:
        print("\n".join([*sampling_costs(workdir), ""]), flush=True)
        if not args.skip_vllm:
            print("\n".join([*vllm_sampling_costs(workdir), ""]), flush=True)
    if not args.skip_report_scale:
        report_scale(["--workdir", str(workdir / "report-scale")])
        print(flush=True)
    if not args.skip_rerun:
        print("\n".join(cached_rerun(workdir)))
    budget_replay([])
    budget_scale([])
    if any((BUDGET_ROOT / "full").glob("*/manifest.json")):
        # the same replay on grids drawn from the recorded full run's cells
        budget_scale(["--from-run", str(BUDGET_ROOT / "full")])
    budget_real([])
    budget_baseline([])
    return 0


if __name__ == "__main__":
    sys.exit(main())
