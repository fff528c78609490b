"""A prompt over the model's context is refused before any generation, naming file and row."""

from __future__ import annotations

import polars as pl
import pytest

from sago_core.config import GenerationSettings, VariantGrid
from sago_core.errors import InputError
from sago_core.stages.generation import generate_responses
from sago_core.stages.variants import build_variant_candidates
from tests.fakes import FakeBackend


def test_huge_prompt_is_refused_with_its_origin() -> None:
    prompts = pl.DataFrame(
        {
            "dataset": ["mine", "mine"],
            "prompt_id": ["short", "long"],
            "prompt": ["What is two plus two?", "word " * 3000],
            "references": [[], []],
            "source": ["/data/mine.csv, row 1", "/data/mine.csv, row 2"],
        }
    )
    grid = VariantGrid.model_validate(
        {
            "register": None,
            "structural": None,
            "noise": {
                "spacing": [1],
                "punctuation": [],
                "capitalization": [],
                "positions": ["global"],
            },
        }
    )
    variants = build_variant_candidates(prompts, grid, 0)
    backend = FakeBackend(lambda p: "four", window=2048)
    with pytest.raises(InputError) as err:
        generate_responses(
            backend, "fake", prompts, variants, GenerationSettings(max_new_tokens=64)
        )
    message = str(err.value)
    assert "file /data/mine.csv, row 2, column 'prompt'" in message
    assert "prompt long" in message and "2048" in message
    assert backend.generate_calls == 0
