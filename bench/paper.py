"""``python -m bench.paper`` (``make bench-paper``): the paper preset's grid through sago, timed
per stage and held against the raw engines in the same session.

The run is ``sago run --preset paper`` (16 prompts x 6 datasets x 83 variants = 7,968
generations at 100 new tokens) on a ``vllm:`` model (default: the embedded SmolLM2-135M),
the embedded MiniLM as the BERTScore encoder and the offline mirroring rules (or
``--judge`` for a local judge model), in a subprocess whose process tree's memory is sampled.
Afterwards, from the run's manifest (its stage records) and artifacts:

1. per stage: wall time, items/s and tokens/s, peak RSS of the process tree while the stage
   ran (its window: the artifact's mtime minus the recorded seconds), artifact bytes;
2. the ratios against the raw engines on the same inputs (``bench/paper_raw.py``), and the
   stages after the scoring pass as a share of the whole run;
3. with ``--curve 1,2,4``: the run again at 2x and 4x the prompts, per stage the log-log time
   exponent and peak memory.

``--prompts`` and ``--max-new-tokens`` run a fraction of the grid (the defaults are the
paper's). Everything is written under ``--workdir`` (report.md, results.json).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import polars as pl
import yaml

from bench.paper_table import (
    BERTSCORE,
    GENERATE,
    SCORING_PASS,
    Ratio,
    StageRecord,
    StageRow,
    post_scoring_seconds,
    ratio_table,
    scale_table,
    stage_rows,
    stage_table,
    steady_rate,
)
from sago_core.artifacts.layout import CACHE_DIR, CacheLayout
from sago_core.backends.factory import BackendPlaces, open_backend
from sago_core.backends.protocol import Backend
from sago_core.backends.target import model_target
from sago_core.config import DATASET_NAMES, RunConfig, build_config

ROOT = Path(__file__).resolve().parents[1]
MODEL = "vllm:smollm2-135m"
# The embedded MiniLM at its final layer, with its calibrated threshold (the demo's scorer).
SCORER = {"model": "minilm-l6", "num_layers": 6, "semantic_threshold": 0.78}


@dataclass(frozen=True)
class Grid:
    data_dir: Path
    prompts: int = 16
    max_new_tokens: int = 100
    datasets: tuple[str, ...] = DATASET_NAMES
    model: str = MODEL
    judge: str | None = None
    structural: bool = True  # False: the grid without the rewriter's family (77 variants)
    warm_cache: Path | None = None  # a runs folder whose caches each run starts from
    extra: tuple[tuple[str, object], ...] = ()  # top-level config keys of --config, merged

    def config_values(self, prompts: int) -> dict:
        values: dict = {
            "models": [self.model],
            "datasets": list(self.datasets),
            "data_dir": str(self.data_dir),
            "n": prompts,
            "generation": {"max_new_tokens": self.max_new_tokens},
            "bertscore": SCORER,
        }
        if self.judge:
            values["register_judge"] = {"model": self.judge}
        if not self.structural:
            values["variants"] = {"structural": None}
        for key, value in self.extra:
            both = isinstance(value, dict) and isinstance(values.get(key), dict)
            values[key] = {**values[key], **value} if both else value  # type: ignore[dict-item]
        return values


class MemorySampler:
    """RSS of a process and all its descendants (the vLLM worker, Prefect's server), in MiB,
    sampled with wall-clock times until stopped."""

    def __init__(self, pid: int, every_s: float = 0.25) -> None:
        self.pid, self.every_s = pid, every_s
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import psutil

        try:
            root = psutil.Process(self.pid)
        except psutil.NoSuchProcess:
            return
        while not self._stop.is_set():
            total = 0
            try:
                for proc in [root, *root.children(recursive=True)]:
                    try:
                        total += proc.memory_info().rss
                    except psutil.NoSuchProcess:
                        continue
            except psutil.NoSuchProcess:
                return
            self.samples.append((time.time(), total / 2**20))
            self._stop.wait(self.every_s)

    def stop(self) -> list[tuple[float, float]]:
        self._stop.set()
        self._thread.join()
        return self.samples


def run_sago(grid: Grid, prompts: int, workdir: Path) -> tuple[Path, float, list]:
    """One ``sago run`` of the paper preset; (run folder, wall seconds, memory samples)."""
    workdir.mkdir(parents=True, exist_ok=True)
    config_file = workdir / "config.yaml"
    config_file.write_text(yaml.safe_dump(grid.config_values(prompts)), encoding="utf-8")
    runs = workdir / "runs"
    if grid.warm_cache is not None:  # rewrites and materialised weights of an earlier run
        shutil.copytree(grid.warm_cache / CACHE_DIR, runs / CACHE_DIR, dirs_exist_ok=True)
    command = [sys.executable, "-m", "sago_cli", "run", "--preset", "paper"]
    command += ["--config", str(config_file), "--runs-dir", str(runs)]
    env = {
        **os.environ,
        "PREFECT_HOME": str(workdir / "prefect"),
        "PREFECT_LOGGING_LEVEL": "WARNING",
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_OFFLINE": "1",
    }
    log = (workdir / "sago-run.log").open("w")
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    sampler = MemorySampler(process.pid)
    code = process.wait()
    seconds = time.perf_counter() - started
    samples = sampler.stop()
    if code != 0:
        raise SystemExit(f"sago run failed (exit {code}); see {workdir / 'sago-run.log'}")
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir() and not p.name.startswith(".")]
    return run_dir, seconds, samples


def read_records(run_dir: Path, prompt_length: dict[str, int]) -> list[StageRecord]:
    """The manifest's stage records with artifact size and mtime; generated tokens for the
    generation shards, teacher-forced tokens (prompt + response) for the scoring pass."""
    manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    records = []
    for entry in manifest["stages"]:
        path = run_dir / entry["path"]
        stat = path.stat() if path.exists() else None
        tokens = None
        if entry["stage"] in (GENERATE, SCORING_PASS):
            generations = pl.read_parquet(path.with_name("generations.parquet"))
            responses = generations["response_token_ids"].list.len().fill_null(0).sum()
            tokens = int(responses)
            if entry["stage"] == SCORING_PASS:
                tokens += sum(prompt_length[p] for p in generations["prompt_text"].to_list())
        records.append(
            StageRecord(
                stage=entry["stage"],
                seconds=entry.get("seconds"),
                rows=entry.get("rows"),
                bytes=stat.st_size if stat else 0,
                ended=stat.st_mtime if stat else 0.0,
                tokens=tokens,
            )
        )
    return records


def model_backend(config: RunConfig, runs_dir: Path) -> Backend:
    """The run's model backend with the run's caches (no engine started for prompt lengths:
    a ``vllm:`` model answers them from its transformers scorer)."""
    target = model_target(config, config.models[0])
    return open_backend(target, BackendPlaces(CacheLayout.of(runs_dir)))


def measure(grid: Grid, prompts: int, workdir: Path, raw: bool, raw_fraction: float = 1.0) -> dict:
    """One run, its per-stage rows and (``raw``) its ratios against the raw engines, on
    every k-th generation and pair (``raw_step``). The run's own
    measurements are saved (``sago.json``) before the raw engines start."""
    from bench.paper_raw import (
        answer_pairs,
        bertscore_side_by_side,
        bleu_seconds,
        open_vllm,
        raw_forward,
        raw_generation,
        raw_step,
        teacher_forced_rows,
    )

    run_dir, wall, samples = run_sago(grid, prompts, workdir)
    config = build_config("paper", grid.config_values(prompts))
    generations = pl.read_parquet(run_dir / "generations.parquet")
    texts = generations["prompt_text"].unique().to_list()
    measured = model_backend(config, run_dir.parent).prompt_lengths(texts)
    lengths = dict(zip(texts, measured or [0] * len(texts), strict=True))
    records = read_records(run_dir, lengths)
    rows = stage_rows(records, samples)
    result: dict = {
        "grid": {
            "datasets": list(grid.datasets),
            "max_new_tokens": grid.max_new_tokens,
            "model": grid.model,
            "structural": grid.structural,
        },
        "records": [asdict(r) for r in records],
        "prompts_per_dataset": prompts,
        "generations": generations.height,
        "wall_seconds": wall,
        "run_dir": str(run_dir),
        "rows": [asdict(r) for r in rows],
        "post_scoring_seconds": post_scoring_seconds(records),
    }
    (workdir / "sago.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    if not raw:
        return result
    by_stage = {r.stage: r for r in rows}
    backend = open_vllm(config, run_dir.parent)
    scorer = backend.scorer()
    step = raw_step(raw_fraction)
    sample = generations.gather_every(step)
    gen = raw_generation(backend, config, sample, workdir)
    responses = [list(r) for r in sample["response_token_ids"].to_list()]
    forward = raw_forward(
        scorer,
        teacher_forced_rows(scorer, sample["prompt_text"].to_list(), responses),
        config.analysis.batch_size,
        config.analysis.max_batch_tokens,
    )
    pairs = pl.read_parquet(next(run_dir.glob("models/*/pairs.parquet")))
    candidates, references, stage_f1 = answer_pairs(generations, pairs)
    candidates, references, stage_f1 = candidates[::step], references[::step], stage_f1[::step]
    bert, sago_bert = bertscore_side_by_side(config, candidates, references, stage_f1)
    bert_stage = by_stage[BERTSCORE]
    ratios = [
        Ratio(
            "generation",
            "tokens/s",
            by_stage[GENERATE].tokens_per_s,
            gen.rate,
            steady_rate(records, GENERATE),
        ),
        Ratio(
            "scoring pass",
            "tokens/s",
            by_stage[SCORING_PASS].tokens_per_s,
            forward.rate,
            steady_rate(records, SCORING_PASS),
        ),
        Ratio(
            "BERTScore",
            "pairs/s",
            bert_stage.items_per_s,
            bert.rate,
            # sago's own scorer beside bert_score's on the same pairs: no BLEU, no load
            sago_bert.rate,
        ),
    ]
    result["ratios"] = [
        {**asdict(r), "value": r.value, "steady": r.steady, "target": r.target} for r in ratios
    ]
    result["raw"] = {
        "every": step,
        "generations": sample.height,
        "pairs": len(candidates),
        "generation": asdict(gen),
        "scoring_pass": asdict(forward),
        "bertscore": asdict(bert),
        "sago_bertscore": asdict(sago_bert),
        "bleu_seconds": bleu_seconds(candidates, references),
        # what the column showed before: the stage less bert_score's load
        "stage_less_load": None
        if bert_stage.items is None
        else bert_stage.items / max(bert_stage.seconds - bert.load_seconds, 1e-9),
    }
    return result


def rows_of(result: dict) -> list[StageRow]:
    return [StageRow(**r) for r in result["rows"]]


def bertscore_note(raw: dict) -> str:
    """The BERTScore ratio's side-by-side measurement, and the stage's other costs."""
    from bench.paper_raw import RawRun

    sago, bert = raw["sago_bertscore"], raw["bertscore"]
    rate = RawRun(**sago).rate, RawRun(**bert).rate
    before = raw.get("stage_less_load")
    was = "NA" if before is None else f"{before:,.1f} pairs/s ({before / rate[1]:.3f})"
    return (
        f"BERTScore without one-off loads: sago's scorer (`score-pairs`' F1) and bert_score's, "
        f"alternately on the same {sago['amount']} pairs in one process, best of 2: "
        f"{rate[0]:,.1f} vs {rate[1]:,.1f} pairs/s; F1 equal to the stage's (1e-6): "
        f"{100 * sago['identical']:.1f}% vs {100 * bert['identical']:.1f}%; encoders loaded "
        f"in {sago['load_seconds']:.1f} s vs {bert['load_seconds']:.1f} s. The stage's BLEU "
        f"over the same pairs: {raw['bleu_seconds']:.2f} s. Before (the stage less "
        f"bert_score's load, under the run's load): {was}"
    )


def raw_share(raw: dict) -> str:
    """Which of the run's generations and pairs the raw engines redid (``raw_step``; a
    results.json of before ``every`` kept the fraction)."""
    from bench.paper_raw import raw_step

    every = raw.get("every") or raw_step(raw.get("fraction", 1))
    return "all of the run's" if every == 1 else f"every {every}th of the run's"


def report(main: dict, curve: list[dict]) -> list[str]:
    grid = main["grid"]
    family = "" if grid["structural"] else " (structural family left out)"
    lines = [
        f"paper grid{family} at {main['prompts_per_dataset']} prompt(s) per dataset x "
        f"{len(grid['datasets'])} datasets, max_new_tokens {grid['max_new_tokens']}, model "
        f"{grid['model']}: {main['generations']} generations, whole run "
        f"{main['wall_seconds']:.1f} s",
        "",
        *stage_table(rows_of(main), main["wall_seconds"]),
        "",
    ]
    if "ratios" in main:
        ratios = [
            Ratio(r["name"], r["unit"], r["sago"], r["raw"], r["steady_sago"])
            for r in main["ratios"]
        ]
        lines += ratio_table(ratios, main["post_scoring_seconds"], main["wall_seconds"])
        raw = main["raw"]
        lines += [
            "",
            f"raw engines on {raw.get('generations', main['generations'])} generations and "
            f"{raw.get('pairs', 'all')} pairs ({raw_share(raw)}); "
            f"raw vLLM: engine built in {raw['generation']['load_seconds']:.1f} s, answers "
            f"identical to sago's: {100 * (raw['generation']['identical'] or 0):.1f}%; "
            f"bert_score's encoder loaded in {raw['bertscore']['load_seconds']:.1f} s",
        ]
        if "sago_bertscore" in raw:
            lines.append(bertscore_note(raw))
    if len(curve) > 1:
        sizes = [c["generations"] for c in curve]
        lines += [
            "",
            "scale curve: "
            + ", ".join(
                f"{c['prompts_per_dataset']} prompt(s)/dataset = {c['generations']} generations"
                for c in curve
            ),
            "",
            *scale_table(sizes, [rows_of(c) for c in curve], [c["wall_seconds"] for c in curve]),
        ]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.paper",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        help="folder with one subfolder per dataset (the six paper datasets); required",
    )
    parser.add_argument("--prompts", type=int, default=16, help="prompts per dataset (paper 16)")
    parser.add_argument("--max-new-tokens", type=int, default=100, help="paper 100")
    parser.add_argument("--datasets", default=",".join(DATASET_NAMES))
    parser.add_argument(
        "--model",
        default=MODEL,
        help="a vllm: model spec (another backend, e.g. mock:x, with --skip-raw: the curve "
        "of sago's own stages without an engine)",
    )
    parser.add_argument("--judge", help="a local judge model spec (default: offline rules)")
    parser.add_argument(
        "--curve", default="1", help="multipliers of --prompts for the scale curve, e.g. 1,2,4"
    )
    parser.add_argument(
        "--no-structural", action="store_true", help="leave out the rewriter's family"
    )
    parser.add_argument(
        "--warm-cache",
        type=Path,
        help="a runs folder whose caches (rewrites, materialised weights) each run starts from",
    )
    parser.add_argument(
        "--config",
        type=Path,
        help="YAML of further run settings (e.g. vllm: {dtype: bfloat16, "
        "gpu_memory_utilization: 0.6} on a GPU), merged over the bench's own",
    )
    parser.add_argument("--skip-raw", action="store_true", help="no raw-engine ratios")
    parser.add_argument(
        "--raw-fraction",
        type=float,
        default=1.0,
        help="the raw engines run on every (1/F)-th generation and pair (e.g. 0.25: a "
        "quarter), so the ratios of the full grid do not cost a second run",
    )
    parser.add_argument("--workdir", type=Path, help="keep everything here (default: temp)")
    parser.add_argument("--render", type=Path, help="print the report of a finished WORKDIR")
    args = parser.parse_args()
    if args.render:
        saved = json.loads((args.render / "results.json").read_text(encoding="utf-8"))
        print("\n".join(report(saved[0], saved)))
        return 0
    if args.data_dir is None:
        parser.error("--data-dir is required (a folder with one subfolder per dataset)")
    grid = Grid(
        args.data_dir.resolve(),
        args.prompts,
        args.max_new_tokens,
        tuple(d.strip() for d in args.datasets.split(",") if d.strip()),
        args.model,
        args.judge,
        not args.no_structural,
        args.warm_cache.resolve() if args.warm_cache else None,
        tuple((yaml.safe_load(args.config.read_text(encoding="utf-8")) or {}).items())
        if args.config
        else (),
    )
    workdir = (args.workdir or Path(tempfile.mkdtemp(prefix="sago-bench-paper-"))).resolve()
    multipliers = [int(m) for m in args.curve.split(",")]
    print(f"bench-paper: artifacts in {workdir}", flush=True)
    curve = []
    for i, m in enumerate(multipliers):
        prompts = args.prompts * m
        print(f"running sago at {prompts} prompt(s) per dataset ...", flush=True)
        curve.append(
            measure(
                grid,
                prompts,
                workdir / f"{prompts}p",
                raw=i == 0 and not args.skip_raw,
                raw_fraction=args.raw_fraction,
            )
        )
    lines = report(curve[0], curve)
    (workdir / "results.json").write_text(json.dumps(curve, indent=2), encoding="utf-8")
    (workdir / "report.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
