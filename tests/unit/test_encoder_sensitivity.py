"""The scorer-sensitivity table: the same run's SGS-BERT under a second encoder and
the rank agreement between the two, checked with stand-in encoders whose answers are known."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl
import pytest

from sago_core.artifacts.schemas import DELTAS, conform
from sago_core.scoring.scorer_sensitivity import (
    render_sensitivity,
    rescored_deltas,
    scorer_sensitivity,
)

# (model, dataset) -> per prompt, the F1 of its two variants under encoder A (the run's)
RUN = {
    ("m1", "d1"): [(0.9, 0.8), (0.7, 0.95)],
    ("m1", "d2"): [(0.6, 0.5), (0.85, 0.9)],
    ("m2", "d1"): [(0.99, 0.97), (0.95, 0.9)],
    ("m2", "d2"): [(0.4, 0.7), (0.8, 0.75)],
}


def _run() -> tuple[pl.DataFrame, pl.DataFrame]:
    """deltas (bert axis, plus a bleu row that must stay as it is) and generations whose
    variant answer text is its F1 under A (``"f=0.9"``), so a stand-in encoder reads it."""
    deltas, generations = [], []
    for (model, dataset), prompts in RUN.items():
        for p, f1s in enumerate(prompts):
            key = {"model": model, "dataset": dataset, "prompt_id": f"{dataset}-{p}"}
            generations.append({**key, "variant_id": "base", "answer_text": "base answer"})
            for v, f1 in enumerate(f1s):
                vid = f"noise:{v}"
                generations.append({**key, "variant_id": vid, "answer_text": f"f={f1}"})
                row = {**key, "variant_id": vid, "family": "noise", "subtype": "spacing"}
                row |= {"strength": 5.0, "position": "global", "missing_reason": None}
                deltas.append({**row, "axis": "bert", "delta": f1 - 1, "delta_norm": f1 - 1})
                deltas.append({**row, "axis": "bleu", "delta": -50.0, "delta_norm": -0.5})
    cross = {**deltas[0], "variant_id": "language:fr", "family": "language", "delta": None}
    cross |= {"delta_norm": None, "missing_reason": "answers in different languages"}
    generations.append(
        {
            **{k: cross[k] for k in ("model", "dataset", "prompt_id")},
            "variant_id": "language:fr",
            "answer_text": "f=0.1",
        }
    )
    return conform(pl.DataFrame([*deltas, cross]), DELTAS), pl.DataFrame(generations)


def _doubled(candidates: Sequence[str], references: Sequence[str]) -> list[float]:
    """An encoder that sees every gap twice as wide: 1 - 2 (1 - F1_A)."""
    return [1 - 2 * (1 - float(c.removeprefix("f="))) for c in candidates]


def _reversed(candidates: Sequence[str], references: Sequence[str]) -> list[float]:
    """An encoder that reverses which answers are far from the base: F1_B = F1_A - 1 + 0.3."""
    return [0.3 + (1 - float(c.removeprefix("f="))) * 0.5 for c in candidates]


def test_rescoring_replaces_only_the_bert_values_the_run_had() -> None:
    deltas, generations = _run()
    seen: list[tuple[str, str]] = []

    def spy(candidates: Sequence[str], references: Sequence[str]) -> list[float]:
        seen.extend(zip(candidates, references, strict=True))
        return _doubled(candidates, references)

    out = rescored_deltas(deltas, generations, spy)
    assert out.columns == deltas.columns and set(out["axis"]) == {"bert"}
    assert len(seen) == 16 and all(ref == "base answer" for _, ref in seen)
    row = out.filter((pl.col("prompt_id") == "d1-0") & (pl.col("variant_id") == "noise:0"))
    # m1 d1-0 noise:0 had F1 0.9 -> the stand-in gives 0.8 -> delta -0.2
    assert sorted(row["delta"].to_list()) == pytest.approx([-0.2, -0.02])  # m1 and m2
    cross = out.filter(pl.col("variant_id") == "language:fr").row(0, named=True)
    assert cross["delta"] is None and cross["missing_reason"] == "answers in different languages"


def test_an_encoder_that_only_scales_agrees_on_every_rank() -> None:
    deltas, generations = _run()
    found = scorer_sensitivity(deltas, generations, _doubled)
    # m1 d1: s per prompt = RMS(.1, .2) = .15811, RMS(.3, .05) = .21506 -> SGS .18659
    m1d1 = found.cells.filter((pl.col("model") == "m1") & (pl.col("dataset") == "d1"))
    assert m1d1["sgs_a"][0] == pytest.approx((0.025**0.5 + 0.04625**0.5) / 2)
    assert found.cells["ratio"].to_list() == pytest.approx([2.0] * found.cells.height)
    cells, prompts = found.agreements
    assert (cells.grain, cells.n, cells.spearman, cells.kendall) == ("cells", 4, 1.0, 1.0)
    assert (prompts.n, prompts.spearman) == (8, pytest.approx(1.0))
    text = render_sensitivity(found, "A-enc", "B-enc")
    assert "A: A-enc (the run's). B: B-enc." in text
    assert "| m1 | __pooled__ |" in text and "| cells | 4 | 1.0000 | 1.0000 |  |" in text


def test_an_encoder_that_disagrees_shows_it_and_too_few_cells_have_no_agreement() -> None:
    deltas, generations = _run()
    found = scorer_sensitivity(deltas, generations, _reversed)
    cells, prompts = found.agreements
    assert cells.spearman == pytest.approx(-1.0) and prompts.spearman is not None
    assert prompts.spearman < 0
    one = deltas.filter((pl.col("model") == "m1") & (pl.col("dataset") == "d1"))
    few = scorer_sensitivity(one, generations, _doubled).agreements[0]
    assert few.spearman is None and few.missing_reason is not None
    assert "fewer than 3 (model, dataset)s" in few.missing_reason and few.n == 1
