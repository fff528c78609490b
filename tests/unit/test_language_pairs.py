"""With an English-only encoder, a cross-language pair never reaches it."""

from __future__ import annotations

import math
from collections.abc import Sequence

import polars as pl

from sago_core.axes.text_similarity import skip_cross_language, without_cross_language
from sago_core.stages.pairs import score_pairs

KEY = ("m", "toy", "p1")


def _generations() -> pl.DataFrame:
    rows = [  # (variant_id, family, answer)
        ("base", "base", "Paris is the capital."),
        ("language:de:100:global", "language", "Paris ist die Hauptstadt."),
        ("language:ja:100:global", "language", "Paris is the capital!"),  # shared below
        ("noise:space:5:global", "noise", "Paris is the capital!"),
        ("noise:space:20:global", "noise", "It is Paris."),
    ]
    return pl.DataFrame(
        [
            {
                "model": KEY[0],
                "dataset": KEY[1],
                "prompt_id": KEY[2],
                "variant_id": v,
                "family": f,
                "response_text": a,
                "answer_text": a,
            }
            for v, f, a in rows
        ]
    )


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def f1(self, candidates: Sequence[str], references: Sequence[str]) -> list[float]:
        self.seen += list(zip(candidates, references, strict=True))
        return [0.5] * len(candidates)


def test_an_english_only_encoder_never_sees_a_pair_only_language_rows_hold() -> None:
    generations, recorder = _generations(), Recorder()
    f1 = skip_cross_language(recorder.f1, generations, multilingual=False)
    pairs = without_cross_language(score_pairs(generations, f1), generations, False)
    base = "Paris is the capital."
    # the ja pair is also a noise row's: scored for it (the scorer embeds a pair once)
    assert set(recorder.seen) == {("It is Paris.", base), ("Paris is the capital!", base)}
    bert = dict(zip(pairs["variant_id"], pairs["bert_f1"], strict=True))
    assert bert["language:de:100:global"] is None
    assert bert["language:ja:100:global"] is None
    assert bert["noise:space:5:global"] == 0.5
    assert bert["noise:space:20:global"] == 0.5


def test_a_multilingual_encoder_scores_every_pair() -> None:
    generations, recorder = _generations(), Recorder()
    f1 = skip_cross_language(recorder.f1, generations, multilingual=True)
    pairs = without_cross_language(score_pairs(generations, f1), generations, True)
    assert len(recorder.seen) == 4
    assert not any(v is None or math.isnan(v) for v in pairs["bert_f1"].to_list())
