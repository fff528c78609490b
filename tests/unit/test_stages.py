"""Stage functions end to end on a tiny random model: the self-delta is zero on every axis."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from sago_core.axes.text_similarity import get_bert_scorer
from sago_core.backends.hf import HFBackend
from sago_core.backends.model_source import resolve_local_model
from sago_core.config import AnalysisSettings, GenerationSettings, VariantGrid
from sago_core.scoring.deltas import compute_deltas
from sago_core.stages.analysis import analyse_pairs
from sago_core.stages.generation import generate_responses
from sago_core.stages.pairs import detect_mirroring_frame, score_pairs
from sago_core.stages.variants import build_variant_candidates
from sago_core.vocabulary import AXES
from tests.fakes import PROMPTS


@pytest.fixture(scope="module")
def backend(tiny_model_dir: Path) -> HFBackend:
    return HFBackend(resolve_local_model(str(tiny_model_dir)))


def _deltas(backend: HFBackend, variants: pl.DataFrame) -> pl.DataFrame:
    generations = generate_responses(
        backend, "hf:tiny", PROMPTS, variants, GenerationSettings(max_new_tokens=5, batch_size=8)
    )
    analysis = analyse_pairs(backend, generations, AnalysisSettings(batch_size=8))
    scorer = get_bert_scorer("minilm-l6", 6)
    pairs = score_pairs(generations, scorer.f1)
    mirroring = detect_mirroring_frame(generations)
    return compute_deltas(generations, analysis, pairs, mirroring)


@pytest.mark.slow
def test_a_prompt_compared_with_itself_has_zero_delta_on_every_axis(backend: HFBackend) -> None:
    grid = VariantGrid.model_validate({"register": {"strengths": [2]}, "noise": None})
    candidates = build_variant_candidates(PROMPTS, grid, seed=0)
    itself = (
        candidates.join(PROMPTS.select("prompt_id", "prompt"), on="prompt_id")
        .with_columns(pl.col("prompt").alias("text"))
        .drop("prompt")
    )
    deltas = _deltas(backend, itself)
    assert set(deltas["axis"]) == set(AXES)
    replay = deltas.filter(pl.col("family") == "replay")
    assert replay["prompt_id"].n_unique() == 2  # the noise floor row, one per prompt
    assert deltas["delta"].null_count() == 0
    assert deltas["delta"].abs().max() == 0.0
    # An unchanged prompt has no surface form to mirror: the replay's MR is 0 by construction.
    replay_mr = replay.filter(pl.col("axis") == "mr")
    assert replay_mr["delta"].to_list() == [0.0, 0.0]


@pytest.mark.slow
def test_real_variants_fill_every_axis(backend: HFBackend) -> None:
    grid = VariantGrid.model_validate(
        {
            "register": {"strengths": [-4, 4], "positions": ["prefix"]},
            "noise": {
                "spacing": [5],
                "punctuation": [3],
                "capitalization": [50],
                "positions": ["global"],
            },
            "replay": False,
        }
    )
    deltas = _deltas(backend, build_variant_candidates(PROMPTS, grid, seed=0))
    assert len(deltas) == 2 * 5 * len(AXES)
    assert deltas["delta"].null_count() == 0
    moved = deltas.filter(pl.col("axis") == "act")["delta"]
    assert (moved < 0).all() and (moved >= -2).all()
    scales = deltas["axis"].replace_strict(
        {"act": 2.0, "bleu": 100.0, "bert": 1.0, "prob": 250.0, "ent": 10.0, "mr": 1.0}
    )
    np.testing.assert_allclose(deltas["delta_norm"], deltas["delta"] / scales, rtol=1e-12)
