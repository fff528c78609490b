"""``python -m bench.report_scale``: the post-scoring stages at 1,000 to 8,000 instances.

The target: at the paper's size (16 prompts x 6 datasets x 83 variants = 7,968
instances per model) the report renders in under 10 s, and nothing after the scoring
pass grows faster than the run. No model is needed: ``build_run`` writes a run folder with
the exact artifact schemas (``sago_core/artifacts/schemas.py``) at any size, its variants
built by sago's own paper grid (75 register and noise variants per prompt, the replay) plus
eight structural ones (length and mood, as the rewriter names them), texts of paper-like
length (prompts ~40 words, answers ~70), deltas, log-probabilities and per-layer cosines
drawn from a generator seeded by the size. Scores and summary come from sago's own
``score_prompts`` and ``summarize``. Then each stage's task body (``task.fn``: read its
artifacts, call its core function, write its artifact; no Prefect) runs at every size and
is timed, in the order of the evaluation flow.

It prints, per stage and size, the seconds, then the log-log exponent over the sizes and
the ratio t(largest) / t(smallest) beside the linear ratio; report.html's bytes per size and
its bound (``sago_core.report.page.html.MAX_HTML_BYTES``), and render-report's seconds at the
largest size against the 10 s target. ``--profile STAGE`` prints the cProfile of one stage
at the largest size.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import math
import pstats
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from sago.tasks.insights import (
    axis_pca_task,
    axis_structure_task,
    build_instances_task,
    tail_statistics_task,
)
from sago.tasks.locate import layer_profiles_task
from sago.tasks.peer_metrics import peer_metrics_task
from sago.tasks.report import render_report_task
from sago_core.artifacts.layout import (
    ANALYSIS_FILE,
    AXIS_PCA_FILE,
    AXIS_STRUCTURE_FILE,
    CARD_HTML_FILE,
    DELTAS_FILE,
    GENERATIONS_FILE,
    INSTANCES_FILE,
    LAYER_PROFILES_FILE,
    PEER_METRICS_FILE,
    PROMPTS_FILE,
    REPORT_FILE,
    SCORES_FILE,
    SUMMARY_FILE,
    TAILS_FILE,
    VARIANTS_FILE,
    RunLayout,
)
from sago_core.artifacts.schemas import (
    ANALYSIS,
    DELTAS,
    GENERATIONS,
    PROMPTS,
    SCORES,
    SUMMARY,
    VARIANTS,
)
from sago_core.artifacts.store import read_parquet, write_json, write_parquet
from sago_core.config import RunConfig
from sago_core.report.card.build import write_card
from sago_core.report.page.html import MAX_HTML_BYTES, html_size_bound
from sago_core.report.sections.explorer import explorer_section
from sago_core.scoring.prompt_scores import score_prompts
from sago_core.scoring.summary import summarize
from sago_core.stages.variants import build_variant_candidates
from sago_core.vocabulary import AXES, BASE_VARIANT_ID, REPLAY_FAMILY

DATASETS = ("truthfulqa", "nq_open", "alpaca", "simpleqa_verified", "triviaqa", "hotpotqa")
MODEL = "mock:paper"
STRUCTURAL = [("length", m) for m in (0.5, 0.75, 1.5, 2.0)] + [("mood", 1.0)] * 4
LAYERS = 30  # SmolLM2-135M's
SIZES = (1_000, 2_000, 4_000, 8_000)
RENDER_TARGET_S = 10.0
REFERENCE = "Paris"


def _words(rng: random.Random, count: int) -> str:
    return " ".join(f"w{rng.randrange(5000)}" for _ in range(count))


def _prompts(count: int, rng: random.Random) -> pl.DataFrame:
    rows = [
        {
            "dataset": DATASETS[i % len(DATASETS)],
            "prompt_id": f"p{i:05d}",
            "prompt": _words(rng, 40) + "?",
            "references": [REFERENCE] if i % 3 else [],
            "source": f"synthetic:{i}",
            "reference_missing_reason": None if i % 3 else "dataset has no reference answers",
        }
        for i in range(count)
    ]
    return pl.DataFrame(rows, schema=PROMPTS)


def _variants(prompts: pl.DataFrame, rng: random.Random) -> pl.DataFrame:
    """The paper grid's register and noise variants and the replay, eight structural
    rewrites per prompt, about 3% rejected by the filter (replay always kept)."""
    built = build_variant_candidates(prompts, RunConfig().variants, seed=0)
    structural = pl.DataFrame(
        [
            {
                "dataset": p["dataset"],
                "prompt_id": p["prompt_id"],
                "variant_id": f"structural:{subtype}:{strength:g}:global:{i}",
                "family": "structural",
                "subtype": subtype,
                "strength": strength,
                "position": "global",
                "text": _words(rng, int(40 * strength)) + "?",
                "seed": i,
            }
            for p in prompts.iter_rows(named=True)
            for i, (subtype, strength) in enumerate(STRUCTURAL)
        ]
    )
    frame = pl.concat([built, structural], how="diagonal_relaxed")
    kept = [family == REPLAY_FAMILY or rng.random() > 0.03 for family in frame["family"].to_list()]
    return frame.with_columns(
        pl.Series("kept", kept),
        pl.Series("semantic_score", [0.85 + 0.15 * rng.random() for _ in kept]),
        pl.when(pl.Series(kept))
        .then(None)
        .otherwise(pl.lit("semantic score < 0.85"))
        .alias("reject_reason"),
        pl.lit(1.0).alias("word_ratio"),
    ).select(list(VARIANTS))


def _generations(prompts: pl.DataFrame, kept: pl.DataFrame, rng: random.Random) -> pl.DataFrame:
    base = prompts.select(
        "dataset",
        "prompt_id",
        pl.lit(BASE_VARIANT_ID).alias("variant_id"),
        pl.lit("base").alias("family"),
        pl.lit("base").alias("subtype"),
        pl.lit(0.0).alias("strength"),
        pl.lit("global").alias("position"),
        pl.col("prompt").alias("text"),
    )
    rows = pl.concat([base, kept.select(base.columns)])
    answers = [
        (REFERENCE + " " if rng.random() < 0.5 else "") + _words(rng, 70) for _ in range(len(rows))
    ]
    engine = json.dumps({"backend": "mock", "determinism": "exact"})
    return rows.select(
        pl.lit(MODEL).alias("model"),
        "dataset",
        "prompt_id",
        "variant_id",
        "family",
        "subtype",
        "strength",
        "position",
        pl.col("text").alias("prompt_text"),
        pl.Series("response_text", answers),
        pl.Series("answer_text", answers),
        pl.Series(
            "response_token_ids",
            [list(range(100))] * len(rows),
            dtype=pl.List(pl.Int32),
        ),
        pl.lit("length").alias("finish_reason"),
        pl.lit(None, pl.String).alias("failure_reason"),
        pl.lit(engine).alias("engine"),
    )


def _analysis(generations: pl.DataFrame, np_rng: np.random.Generator) -> pl.DataFrame:
    n = len(generations)
    is_base = (generations["variant_id"] == BASE_VARIANT_ID).to_numpy()
    drift = np.cumsum(np_rng.uniform(0, 0.01, (n, LAYERS)), axis=1)
    cosines = np.where(is_base[:, None], 1.0, 1.0 - drift)
    return generations.select("model", "dataset", "prompt_id", "variant_id").with_columns(
        pl.Series("layer_cosines", cosines.tolist(), dtype=pl.List(pl.Float64)),
        pl.Series("layer_cosines_user", (cosines * 0.99).tolist(), dtype=pl.List(pl.Float64)),
        pl.Series("act_cos_mean", cosines.mean(axis=1)),
        pl.Series("logprob", -np_rng.uniform(20, 200, n)),
        pl.Series("mean_entropy", np_rng.uniform(0.5, 3, n)),
        pl.lit(100, pl.Int32).alias("n_response_tokens"),
        pl.lit(None, pl.String).alias("missing_reason"),
    )


def _deltas(kept: pl.DataFrame, np_rng: np.random.Generator) -> pl.DataFrame:
    axes = pl.DataFrame({"axis": list(AXES)})
    rows = kept.select(
        "dataset", "prompt_id", "variant_id", "family", "subtype", "strength", "position"
    ).join(axes, how="cross")
    n = len(rows)
    values = np.abs(np_rng.normal(0, 0.05, n))
    missing = np_rng.random(n) < 0.02
    delta = pl.Series("delta", np.where(missing, np.nan, values)).fill_nan(None)
    return rows.with_columns(
        pl.lit(MODEL).alias("model"),
        delta,
        delta.alias("delta_norm"),
        pl.when(pl.Series(missing)).then(pl.lit("no answer")).alias("missing_reason"),
    ).select(list(DELTAS))


def prompts_for(instances: int) -> int:
    """Prompts whose kept variants give about ``instances`` instances (83 per prompt)."""
    return max(len(DATASETS), round(instances / (75 + len(STRUCTURAL))))


def build_run(run_dir: Path, instances: int) -> Path:
    """A finished run's folder up to the summary (no post-scoring artifact yet)."""
    rng, np_rng = random.Random(instances), np.random.default_rng(instances)
    layout = RunLayout(run_dir)
    prompts = _prompts(prompts_for(instances), rng)
    variants = _variants(prompts, rng)
    kept = variants.filter(pl.col("kept"))
    generations = _generations(prompts, kept, rng)
    deltas = _deltas(kept, np_rng)
    scores = score_prompts(deltas)
    model_dir = layout.model_dir(MODEL)
    model_dir.mkdir(parents=True, exist_ok=True)
    for frame, name, schema in (
        (prompts, PROMPTS_FILE, PROMPTS),
        (variants, VARIANTS_FILE, VARIANTS),
        (generations, GENERATIONS_FILE, GENERATIONS),
        (deltas, DELTAS_FILE, DELTAS),
        (scores, SCORES_FILE, SCORES),
        (summarize(scores), SUMMARY_FILE, SUMMARY),
    ):
        write_parquet(frame, run_dir / name, schema)
    write_parquet(_analysis(generations, np_rng), model_dir / ANALYSIS_FILE, ANALYSIS)
    write_json(provenance(run_dir), layout.manifest)
    return run_dir


def provenance(run_dir: Path) -> dict[str, Any]:
    return {
        "run_id": run_dir.name,
        "config": RunConfig().model_dump(mode="json"),
        "config_hash": "0" * 64,
        "seed": 0,
        "models": {MODEL: {"identity": "mock:paper", "kind": "mock"}},
        "packages": {},
        "integrity": {},
        "external": None,
    }


def stages(run_dir: Path) -> dict[str, Callable[[], object]]:
    """Each post-scoring stage's task body over the run folder, in the flow's order."""
    out, root = str(run_dir), run_dir
    analysis = [str(p) for p in RunLayout(run_dir).per_model_files(ANALYSIS_FILE)]

    def path(name: str) -> str:
        return str(root / name)

    return {
        "build-instances": lambda: build_instances_task.fn(
            path(DELTAS_FILE), path(GENERATIONS_FILE), path(PROMPTS_FILE), out
        ),
        "tail-statistics": lambda: tail_statistics_task.fn(path(INSTANCES_FILE), out),
        "axis-structure": lambda: axis_structure_task.fn(path(SCORES_FILE), out),
        "axis-pca": lambda: axis_pca_task.fn(path(SCORES_FILE), out),
        "peer-metrics": lambda: peer_metrics_task.fn(
            path(INSTANCES_FILE), path(DELTAS_FILE), analysis, out
        ),
        "layer-profiles": lambda: layer_profiles_task.fn(analysis, path(GENERATIONS_FILE), 0, out),
        "explorer": lambda: explorer_section(read_parquet(path(INSTANCES_FILE))),
        "render-report": lambda: render_report_task.fn(
            path(SUMMARY_FILE),
            path(SCORES_FILE),
            path(DELTAS_FILE),
            path(VARIANTS_FILE),
            path(PROMPTS_FILE),
            path(GENERATIONS_FILE),
            provenance(run_dir),
            out,
            analysis_paths=analysis,
            instances_path=path(INSTANCES_FILE),
            tails_path=path(TAILS_FILE),
            axis_structure_path=path(AXIS_STRUCTURE_FILE),
            axis_pca_path=path(AXIS_PCA_FILE),
            layer_profiles_path=path(LAYER_PROFILES_FILE),
            peer_metrics_path=path(PEER_METRICS_FILE),
        ),
        "card": lambda: write_card(run_dir),
    }


def measure(run_dir: Path, profile: str | None = None) -> dict[str, tuple[float, float]]:
    """Per stage (each once, in order) its wall and CPU seconds (this process, every thread:
    on shared cores wall time mostly measures the neighbours); ``profile``: print that
    stage's cProfile."""
    seconds = {}
    for name, call in stages(run_dir).items():
        profiler = cProfile.Profile(time.process_time) if name == profile else None
        wall, cpu = time.perf_counter(), time.process_time()
        if profiler is not None:
            profiler.runcall(call)
        else:
            call()
        seconds[name] = (time.perf_counter() - wall, time.process_time() - cpu)
        if profiler is not None:
            text = io.StringIO()
            pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(40)
            print(text.getvalue())
    return seconds


def exponent(sizes: list[int], seconds: list[float]) -> float | None:
    """The least-squares slope of log t over log N (None with fewer than two sizes)."""
    if len(sizes) < 2 or min(seconds) <= 0:
        return None
    x, y = np.log(sizes), np.log(seconds)
    return float(np.polyfit(x, y, 1)[0])


Results = dict[int, dict[str, tuple[float, float]]]  # size -> stage -> (wall s, CPU s)


def table(results: Results, which: int) -> list[str]:
    """One row per stage: its seconds at each size (``which``: 0 wall, 1 CPU), the log-log
    exponent, and t(largest) / t(smallest) beside the sizes' own ratio (linear growth)."""
    sizes = sorted(results)
    first, last = sizes[0], sizes[-1]
    label = ("wall", "CPU")[which]
    head = "".join(f"{f'{n:,} s':>10}" for n in sizes)
    lines = [f"{label + ' seconds':<16}{head}{'exponent':>10}{'ratio':>9}{'linear':>8}"]
    for name in results[first]:
        times = [results[n][name][which] for n in sizes]
        slope = exponent(sizes, times)
        cells = "".join(f"{t:>10.2f}" for t in times)
        ratio = times[-1] / times[0] if times[0] > 0 else math.nan
        shown = "NA" if slope is None else f"{slope:.2f}"
        lines.append(f"{name:<16}{cells}{shown:>10}{ratio:>9.2f}{last / first:>8.2f}")
    totals = [sum(t[which] for t in results[n].values()) for n in sizes]
    lines.append(f"{'all':<16}{''.join(f'{t:>10.2f}' for t in totals)}")
    return lines


def verdict(results: Results, html_bytes: dict[int, int], variants: dict[int, int]) -> list[str]:
    """report.html's bytes against its bound at the run's instances, render-report's
    seconds against 10 s."""
    sizes = sorted(results)
    last = sizes[-1]
    wall, cpu = results[last]["render-report"]
    met = "met" if wall < RENDER_TARGET_S else "MISSED"
    return [
        "report.html bytes: "
        + ", ".join(f"{n:,}: {html_bytes[n]:,}" for n in sizes)
        + " (bound: "
        + ", ".join(f"{html_size_bound(variants[n]):,}" for n in sizes)
        + f"; at most {MAX_HTML_BYTES:,})",
        f"render-report at {last:,} instances: {wall:.2f} s wall, {cpu:.2f} s CPU "
        f"(target < {RENDER_TARGET_S:.0f} s wall: {met})",
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(str(n) for n in SIZES))
    parser.add_argument("--workdir", type=Path, default=None, help="keep the run folders here")
    parser.add_argument("--profile", default=None, help="cProfile this stage at the largest size")
    args = parser.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        root = args.workdir or Path(tmp)
        results: Results = {}
        html_bytes: dict[int, int] = {}
        variants: dict[int, int] = {}
        for n in sizes:
            run_dir = build_run(root / f"run-{n}", n)
            profile = args.profile if n == sizes[-1] else None
            results[n] = measure(run_dir, profile)
            instances = len(read_parquet(run_dir / INSTANCES_FILE, ["variant_id"]))
            html_bytes[n] = (run_dir / REPORT_FILE).stat().st_size
            variants[n] = instances
            card = (run_dir / CARD_HTML_FILE).stat().st_size
            print(
                f"{n:,} asked, {instances:,} instances: "
                + ", ".join(f"{k} {v[0]:.2f} s ({v[1]:.2f} CPU)" for k, v in results[n].items())
                + f"; report {html_bytes[n]:,} B, card {card:,} B",
                flush=True,
            )
        lines = [*table(results, 0), *table(results, 1)]
        print("\n".join([*lines, *verdict(results, html_bytes, variants)]))


if __name__ == "__main__":
    main()
