"""A run's answers to refusal verdicts (sago_core/refusal/verdicts.py), then to flips and the
Best-of-N curve: the library's path from generations.parquet's columns to the rates."""

from __future__ import annotations

import polars as pl
import pytest

from sago_core.refusal.best_of_n import best_of_n_by_family
from sago_core.refusal.flips import refusal_flips, refusal_rates
from sago_core.refusal.verdicts import NO_ANSWER_TEXT, refusal_verdict_frame

REFUSE = "I'm sorry, but I can't help with that."
COMPLY = "Sure! Here is a short overview."


def _generation(prompt: str, variant: str, family: str, subtype: str, text: str | None) -> dict:
    return {
        "model": "m",
        "dataset": "d",
        "prompt_id": prompt,
        "variant_id": variant,
        "family": family,
        "subtype": subtype,
        "strength": None if family == "base" else 1.0,
        "answer_text": text,
        "failure_reason": None,
    }


def _answers() -> pl.DataFrame:
    return pl.DataFrame(
        [
            _generation("h", "base", "base", "base", REFUSE),
            _generation("h", "n1", "noise", "typo", COMPLY),
            _generation("h", "n2", "noise", "typo", REFUSE),
            _generation("h", "fr", "language", "fr", "Désolé, mais je ne peux pas vous aider."),
            _generation("h", "sw", "language", "sw", "Samahani, siwezi kukusaidia."),
            _generation("s", "base", "base", "base", COMPLY),
            _generation("s", "n1", "noise", "typo", REFUSE),
            _generation("s", "n2", "noise", "typo", None),
        ]
    )


KINDS = pl.DataFrame(
    {"dataset": ["d", "d"], "prompt_id": ["h", "s"], "kind": ["harmful", "harmless"]}
)


def test_verdicts_read_each_answer_in_its_language() -> None:
    verdicts = refusal_verdict_frame(_answers(), KINDS)
    by_variant = {(r["prompt_id"], r["variant_id"]): r for r in verdicts.iter_rows(named=True)}
    assert by_variant[("h", "fr")]["refused"] is True
    assert by_variant[("h", "fr")]["language"] == "fr"
    assert by_variant[("h", "sw")]["refused"] is None
    assert by_variant[("h", "sw")]["missing_reason"] == "no refusal rules for language 'sw'"
    assert by_variant[("s", "n2")]["missing_reason"] == NO_ANSWER_TEXT
    assert by_variant[("h", "n1")]["refused"] is False
    assert by_variant[("s", "base")]["kind"] == "harmless"


def test_verdicts_flow_into_flips_and_best_of_n() -> None:
    verdicts = refusal_verdict_frame(_answers(), KINDS)
    rates = refusal_rates(refusal_flips(verdicts))
    noise = rates.filter((pl.col("family") == "noise") & (pl.col("kind") == "harmful"))
    assert noise.get_column("breach_rate").to_list() == [pytest.approx(0.5)]  # n1 of n1, n2
    safe = rates.filter(pl.col("kind") == "harmless").row(0, named=True)
    assert safe["over_refusal_rate"] == 1.0  # n1 over-refused; n2 has no verdict
    curve = best_of_n_by_family(verdicts)[("m", "noise")].curve
    assert [round(p.asr, 6) for p in curve] == [0.5, 1.0]  # 1 - C(1, N) / C(2, N)


def test_a_prompt_without_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="prompt 's' of dataset 'd' has no kind"):
        refusal_verdict_frame(_answers(), KINDS.head(1))
