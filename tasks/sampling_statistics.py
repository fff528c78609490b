"""The statistics of a run at K > 1 samples per prompt text: the per-model sampling tests,
the deltas built from their excesses, and the run's variance components. The answers
themselves are drawn and analysed by ``tasks.sample_answers``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from sago.tasks.stage import stage_task
from sago_core.artifacts.layout import (
    EXCESS_DELTAS_FILE,
    SAMPLING_TESTS_FILE,
    VARIANCE_COMPONENTS_FILE,
)
from sago_core.artifacts.schemas import DELTAS, SAMPLING_TESTS, VARIANCE_COMPONENTS
from sago_core.artifacts.store import read_parquet, write_parquet
from sago_core.axes.text_similarity import (
    CROSS_LANGUAGE_BLEU,
    ENGLISH_ONLY_ENCODER,
    get_bert_scorer,
    multilingual_encoder,
    sentence_bleu,
)
from sago_core.baselines.bertscore import rescale, rescaled, run_baseline
from sago_core.config import BertScoreSettings
from sago_core.sampling.axis_tests import sampling_tests
from sago_core.sampling.components import variance_components
from sago_core.sampling.excess_deltas import excess_deltas


def _bleu(hypotheses: Sequence[str], references: Sequence[str]) -> list[float]:
    return [sentence_bleu(h, r) for h, r in zip(hypotheses, references, strict=True)]


@stage_task("sampling-tests", run_name="sampling-tests[{model}]")
def sampling_tests_task(
    model: str,
    samples_path: str,
    sample_analysis_path: str,
    prompts_path: str,
    bertscore: BertScoreSettings,
    judged_families: list[str],
    out_dir: str,
) -> str:
    """Excess, permutation test, flips and spread per (prompt, variant, axis) of one model;
    ``judged_families``: families whose mirroring the run's LLM judge decides."""
    multilingual = multilingual_encoder(bertscore.model, bertscore.multilingual)
    scorer = get_bert_scorer(bertscore.model, bertscore.num_layers, bertscore.batch_size)
    baseline = run_baseline(bertscore.model, bertscore.num_layers, bertscore.rescale_with_baseline)
    frame = sampling_tests(
        read_parquet(samples_path),
        read_parquet(sample_analysis_path),
        read_parquet(prompts_path),
        _bleu,
        rescaled(scorer.f1, baseline),
        cross_language={
            "bleu": CROSS_LANGUAGE_BLEU,
            "bert": None if multilingual else ENGLISH_ONLY_ENCODER,
        },
        judged_families=frozenset(judged_families),
        spread_threshold=bertscore.semantic_threshold
        if baseline is None
        else rescale(bertscore.semantic_threshold, baseline),
    )
    return str(write_parquet(frame, Path(out_dir) / SAMPLING_TESTS_FILE, SAMPLING_TESTS))


@stage_task("excess-deltas", run_name="excess-deltas[{model}]")
def excess_deltas_task(model: str, sampling_tests_path: str, deltas_path: str, out_dir: str) -> str:
    """The model's deltas at K > 1, from the excesses (Act from the K = 1 deltas)."""
    frame = excess_deltas(read_parquet(sampling_tests_path), read_parquet(deltas_path))
    return str(write_parquet(frame, Path(out_dir) / EXCESS_DELTAS_FILE, DELTAS))


@stage_task("variance-components")
def variance_components_task(sampling_tests_path: str, out_dir: str) -> str:
    frame = variance_components(read_parquet(sampling_tests_path))
    return str(write_parquet(frame, Path(out_dir) / VARIANCE_COMPONENTS_FILE, VARIANCE_COMPONENTS))
