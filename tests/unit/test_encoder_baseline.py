"""BERTScore rescaled with a baseline: bert-score's formula, the shipped baseline of
the embedded encoder, the configuration key and what rescaling does to the numbers."""

from __future__ import annotations

import math

import pytest

from sago_core.baselines.bertscore import baseline_f1, rescale, rescaled, run_baseline
from sago_core.baselines.bertscore_table import BASELINES
from sago_core.config import BertScoreSettings, build_config
from sago_core.errors import ConfigError


def test_rescaling_is_bert_scores_formula() -> None:
    # (F - b) / (1 - b): b = 0.2, F = 0.6 -> 0.4 / 0.8 = 0.5; identical texts stay 1
    assert rescale(0.6, 0.2) == pytest.approx(0.5)
    assert rescale(1.0, 0.2) == 1.0
    assert rescale(0.2, 0.2) == 0.0  # as alike as two unrelated sentences
    assert rescale(0.1, 0.2) == pytest.approx(-0.125)  # below: negative, as in bert-score
    assert math.isnan(rescale(float("nan"), 0.2))  # a pair not scored stays unscored

    def raw(candidates: list[str], references: list[str]) -> list[float]:
        return [1.0 if c == r else 0.6 for c, r in zip(candidates, references, strict=True)]

    assert rescaled(raw, 0.2)(["a", "a"], ["a", "b"]) == pytest.approx([1.0, 0.5])
    assert rescaled(raw, None) is raw
    # linear: a delta F - 1 and a distance 1 - F scale by 1 / (1 - b), so every ranking stays
    assert rescale(0.6, 0.2) - 1 == pytest.approx((0.6 - 1) / (1 - 0.2))


def test_the_embedded_encoder_has_a_baseline_per_layer_and_hub_encoders_bert_scores() -> None:
    minilm = BASELINES["minilm-l6"]
    assert sorted(minilm) == list(range(7))  # the embeddings and six layers
    assert all(0.0 < f < p + 0.01 and 0.0 < f < 1.0 for p, _, f in minilm.values())
    assert baseline_f1("minilm-l6", 6) == minilm[6][2]
    # bert-score's own file for roberta-large, layer 17 (rescale_baseline/en/roberta-large.tsv)
    roberta = baseline_f1("roberta-large", 17)
    assert roberta is not None and 0.8 < roberta < 0.9
    assert baseline_f1("/models/mine", 6) is None and baseline_f1("minilm-l6", 9) is None


def test_the_configuration_key_is_checked_and_leaves_old_configs_unchanged() -> None:
    assert "rescale_with_baseline" not in BertScoreSettings().model_dump()
    assert run_baseline("minilm-l6", 6, False) is None
    assert run_baseline("minilm-l6", 6, True) == BASELINES["minilm-l6"][6][2]
    on = BertScoreSettings(model="minilm-l6", num_layers=6, rescale_with_baseline=True)
    assert on.model_dump()["rescale_with_baseline"] is True
    with pytest.raises(ValueError, match="no baseline for '/models/mine' at layer 6"):
        BertScoreSettings(model="/models/mine", num_layers=6, rescale_with_baseline=True)
    with pytest.raises(ConfigError, match="rescale_with_baseline"):
        build_config(
            "demo", {"bertscore": {"model": "/models/mine", "rescale_with_baseline": True}}
        )
    assert (
        build_config("demo").result_hash()
        == build_config("demo", {"bertscore": {"rescale_with_baseline": False}}).result_hash()
    )  # the key at its default changes no run id
