"""``python -m bench.budget_real``: a real budgeted run beside the full run of the same grid.

The replay (``bench/budget.py``) asks no model; this compares two finished run folders of
one grid, a full run and a budgeted one (``sago run ... --budget F``), and prints:

- generations asked (rows of ``generations.parquet``) and wall time (the manifest's
  ``started_at`` to ``written_at``: the flow, without the command's start-up) of each, and the
  budgeted run's share of the full run's;
- the budget line (cells, rounds, why it stopped);
- per axis: the full grid's pooled SGS, the budgeted estimate with its 95% half-width,
  whether the interval holds the full value, the budgeted verdicts at each eps against the
  full grid's t-test verdicts, and the planner's predicted half-width for this design (from
  the full run's variance components, with the run's baseline when it had one) over the
  realised one;
- a check that the cells both runs asked gave the same deltas (greedy decoding).

``--record ROOT --data-dir DIR`` builds the pair first (``sago run --preset paper --n 8``,
then the same with ``--budget``) under ROOT/full and ROOT/budgeted: about an hour and a
quarter for the embedded model on 2 CPU cores. Without ``--full``/``--budgeted`` it reads
ROOT's pair (default ``runs/bench-budget``) and, when none is recorded there, says how to
record one (``make bench`` calls it that way).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import polars as pl

from bench.budget import ALPHA, full_truth
from sago_core.artifacts.layout import DELTAS_FILE
from sago_core.budget.cells import CELL, grid_from_deltas
from sago_core.budget.planner import (
    allocated_half_widths,
    planned_components,
    variance_components,
)
from sago_core.budget.schedule import make_schedule
from sago_core.vocabulary import EPSILONS

ROOT = Path("runs/bench-budget")
CONFIG = "bertscore: {model: minilm-l6, num_layers: 6, semantic_threshold: 0.78}\n"
POOLED = "__pooled__"


def run_folder(path: Path) -> Path:
    """A run folder, or the one run folder inside a runs folder."""
    if (path / "manifest.json").is_file():
        return path
    found = sorted(p.parent for p in path.glob("*/manifest.json"))
    if len(found) != 1:
        raise SystemExit(
            f"bench.budget_real: {path} holds {len(found)} finished runs (manifest.json); "
            "name the run folder"
        )
    return found[0]


def wall_seconds(run: Path) -> float:
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    start = datetime.fromisoformat(manifest["started_at"])
    end = datetime.fromisoformat(manifest["written_at"])
    return (end - start).total_seconds()


def compare(full: Path, budgeted: Path) -> list[str]:
    full, budgeted = run_folder(full), run_folder(budgeted)
    budget_file = budgeted / "budget.json"
    if not budget_file.is_file():
        raise SystemExit(f"bench.budget_real: {budget_file} does not exist (not a budgeted run)")
    budget = json.loads(budget_file.read_text(encoding="utf-8"))
    gens = [pl.read_parquet(r / "generations.parquet").height for r in (full, budgeted)]
    walls = [wall_seconds(r) for r in (full, budgeted)]
    lines = [
        f"full run {full.name}: {gens[0]:,} generations, {walls[0]:.0f} s",
        f"budgeted run {budgeted.name}: {gens[1]:,} generations ({gens[1] / gens[0]:.1%} of "
        f"the full run's), {walls[1]:.0f} s ({walls[1] / walls[0]:.1%} of its wall time)",
        f"budget: {budget['cells']:,} of {budget['full_cells']:,} cells "
        f"({budget['cells'] / budget['full_cells']:.0%}), {budget['rounds_run']} of "
        f"{budget['rounds_planned']} rounds, strata {budget['level']}: {budget['stop_reason']}",
    ]
    full_deltas = pl.read_parquet(full / DELTAS_FILE)
    model = str(full_deltas["model"][0])
    gv = grid_from_deltas(full_deltas, model)
    truth = full_truth(gv)
    lines.append(same_cells(full_deltas, pl.read_parquet(budgeted / DELTAS_FILE)))
    schedule = make_schedule(gv.grid, int(budget["budget_cells"]), int(budget["rounds_planned"]))
    per_prompt = budget["cells"] / sum(schedule.prompts)
    estimates = pl.read_parquet(budgeted / "budget_estimates.parquet").filter(
        (pl.col("model") == model) & (pl.col("dataset") == POOLED)
    )
    header = f"{'axis':<5} {'full':>9} {'budgeted':>9} {'+-':>9} {'holds':>6}"
    header += "".join(f" {'agree@' + str(e):>11}" for e in EPSILONS)
    header += f" {'pred hw':>9} {'pred/real':>9}"
    lines += ["", header]
    components = {
        axis: variance_components(schedule.layout, gv.values[:, a])
        for a, axis in enumerate(gv.axes)
    }
    base_run = Path((budget.get("baseline") or {}).get("run") or "")
    if base_run.name and (base_run / DELTAS_FILE).is_file():  # the planner as the run used it
        base = grid_from_deltas(pl.read_parquet(base_run / DELTAS_FILE))
        if base.grid == gv.grid and base.axes == gv.axes:
            components = planned_components(
                components, schedule.layout, gv.values, base.values, gv.axes
            )
    allocated = allocated_half_widths(
        components, min(schedule.prompts), per_prompt, rounds=schedule.rounds
    )
    for axis in gv.axes:
        row = estimates.filter(pl.col("axis") == axis)
        if row.is_empty():
            lines.append(f"{axis:<5} not in the budgeted run's estimates")
            continue
        value, half = float(row["sgs"][0]), float(row["half_width"][0])
        t = truth[axis]
        said = budget["verdicts"].get(f"{model} :: {axis}", {})
        agree = [(said.get(str(e)) == "above") == t["verdicts"][e] for e in EPSILONS]
        predicted = allocated[axis]
        lines.append(
            f"{axis:<5} {t['sgs']:>9.4f} {value:>9.4f} {half:>9.4f} "
            f"{'yes' if abs(value - t['sgs']) <= half else 'no':>6}"
            + "".join(f" {'yes' if ok else 'no':>11}" for ok in agree)
            + f" {predicted:>9.4g} {predicted / half if half > 0 else float('nan'):>9.2f}"
        )
    lines.append(f"(one-sided verdicts at alpha {ALPHA}, the budgeted run's by its spending rule)")
    return lines


def same_cells(full: pl.DataFrame, budgeted: pl.DataFrame) -> str:
    """The largest |difference| between the two runs' normalised deltas on the cells (and
    axes) both measured."""
    keys = ["model", *CELL, "axis"]
    joined = full.select([*keys, "delta_norm"]).join(
        budgeted.select([*keys, "delta_norm"]), on=keys, suffix="_b"
    )
    diff = (joined["delta_norm"] - joined["delta_norm_b"]).abs().drop_nulls().drop_nans()
    worst = float(diff.to_numpy().max()) if len(diff) else 0.0
    cells = joined.select(["model", *CELL]).unique().height
    return (
        f"cells both runs asked (replays included): {cells:,}; "
        f"largest |delta difference| {worst:.2e}"
    )


def record(root: Path, data_dir: Path, prompts: int, fraction: float) -> None:
    root.mkdir(parents=True, exist_ok=True)
    config = root / "config.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    for name, extra in (("full", []), ("budgeted", ["--budget", str(fraction)])):
        if list((root / name).glob("*/manifest.json")):
            print(f"{root / name}: already recorded", flush=True)
            continue
        command = [
            sys.executable, "-m", "sago_cli", "run", "--preset", "paper", "--n", str(prompts),
            "--config", str(config), "--data-dir", str(data_dir),
            "--runs-dir", str(root / name), *extra,
        ]  # fmt: skip
        started = time.perf_counter()
        subprocess.run(command, check=True)
        print(f"{name}: {time.perf_counter() - started:.0f} s", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.budget_real", description=__doc__)
    parser.add_argument("--full", type=Path, help="the full run's folder")
    parser.add_argument("--budgeted", type=Path, help="the budgeted run's folder")
    parser.add_argument("--root", type=Path, default=ROOT, help="a recorded pair's folder")
    parser.add_argument("--record", action="store_true", help="build the pair under --root")
    parser.add_argument("--data-dir", type=Path, help="the datasets' folder (with --record)")
    parser.add_argument("--n", type=int, default=8, help="prompts per dataset (with --record)")
    parser.add_argument("--budget", type=float, default=0.2, help="with --record")
    args = parser.parse_args(argv)
    if args.record:
        if args.data_dir is None:
            parser.error("--record needs --data-dir (the paper's datasets)")
        record(args.root, args.data_dir, args.n, args.budget)
    full = args.full or args.root / "full"
    budgeted = args.budgeted or args.root / "budgeted"
    if not (args.full or args.budgeted) and not list(full.glob("*/manifest.json")):
        print(
            f"real budgeted run: none recorded under {args.root}; record one with `python -m "
            "bench.budget_real --record --data-dir DIR` (the paper grid at 8 prompts per "
            "dataset, full and at 20%: about 75 min on 2 CPU cores)"
        )
        return 0
    print("\n".join(compare(full, budgeted)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
