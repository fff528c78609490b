"""sago's own stages on the benchmark workload (no Prefect: stage functions, timed one by one).

``python -m bench.fast WORKDIR [OUTNAME]`` writes OUTNAME/ (default sago/) with
generations, deltas and timings.
"""

from __future__ import annotations

import sys
from pathlib import Path

from bench.timing import Stopwatch
from bench.workload import BERTSCORE, Workload
from sago_core.artifacts.schemas import DELTAS, GENERATIONS
from sago_core.artifacts.store import write_parquet
from sago_core.axes.text_similarity import get_bert_scorer
from sago_core.backends.factory import open_backend
from sago_core.backends.target import model_target
from sago_core.config import AnalysisSettings, GenerationSettings, PatchingSettings, RunConfig
from sago_core.scoring.deltas import compute_deltas
from sago_core.scoring.prompt_scores import score_prompts
from sago_core.stages.analysis import analyse_pairs
from sago_core.stages.generation import generate_responses
from sago_core.stages.instances import build_instances
from sago_core.stages.pairs import detect_mirroring_frame, score_pairs
from sago_core.stages.patching import patch_variants
from sago_core.statistics.axis_structure import pca_table, spearman_table
from sago_core.statistics.layer_profiles import run_layer_profiles
from sago_core.statistics.tails import tail_statistics

# A few variants at every layer: enough for a time per (variant, layer).
PATCHING = PatchingSettings(layers="all", max_variants=2)


def run(workdir: Path, name: str) -> None:
    spec, prompts, variants = Workload.load(workdir)
    watch = Stopwatch()
    with watch.stage("load"):
        # once per process, whatever the number of datasets
        backend = open_backend(model_target(RunConfig(), spec.model))
        scorer = get_bert_scorer(*BERTSCORE)
    with watch.stage("generation"):
        settings = GenerationSettings(max_new_tokens=spec.max_new_tokens, batch_size=96)
        generations = generate_responses(backend, spec.model, prompts, variants, settings)
    with watch.stage("analysis"):
        analysis = analyse_pairs(backend, generations, AnalysisSettings(batch_size=32))
    with watch.stage("metrics"):
        pairs = score_pairs(generations, scorer.f1)
        deltas = compute_deltas(generations, analysis, pairs, detect_mirroring_frame(generations))
    insights = Stopwatch()  # beyond the mean; the naive pipeline has no such stage
    with insights.stage("instances"):
        instances = build_instances(deltas, generations, prompts)
    with insights.stage("tails"):
        tail_statistics(instances)
    with insights.stage("axis structure"):
        scores = score_prompts(deltas)
        spearman_table(scores), pca_table(scores)
    locate = Stopwatch()  # where the instability sits; sago only
    with locate.stage("layer profiles"):
        run_layer_profiles(analysis, generations, seed=0)
    with locate.stage("patching"):
        patched = patch_variants(
            backend, spec.model, generations, analysis, PATCHING, 0, batch_size=32
        )
    out = workdir / name
    write_parquet(generations, out / "generations.parquet", GENERATIONS)
    write_parquet(deltas, out / "deltas.parquet", DELTAS)
    tokens = int(generations["response_token_ids"].list.len().sum())
    watch.write(
        out / "timings.json",
        tokens=tokens,
        rows=generations.height,
        insights_seconds=insights.seconds,
        instances=instances.height,
        locate_seconds=locate.seconds,
        patched_forwards=patched.height,
        patched_variants=patched.select("dataset", "prompt_id", "variant_id").n_unique(),
        peak_after_mib={**watch.peak_mib, **insights.peak_mib, **locate.peak_mib},
    )


if __name__ == "__main__":
    run(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "sago")
