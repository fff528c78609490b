"""The scorer-sensitivity table of a finished run (``sago audit encoder``): its SGS-BERT under
its own BERTScore encoder (A) and under a second one (B), and their rank agreement
(``sago_core/scoring/scorer_sensitivity.py`` holds the arithmetic).

B is a BERTScore encoder given by name and layer (offline: the embedded ``minilm-l6`` at
another layer, or any local folder), optionally rescaled with its baseline; say which it is
when you report the numbers. A run sampled at K > 1 is refused: its bert deltas are excesses
over samples, which this does not rescore.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from sago_core.artifacts.layout import DELTAS_FILE, GENERATIONS_FILE
from sago_core.errors import InputError


def encoder_sensitivity(run_dir: Path, encoder: str, layer: int, rescale: bool) -> str:
    """The Markdown table of ``run_dir``'s SGS-BERT under its encoder and under ``encoder``
    at ``layer`` (rescaled with its baseline when ``rescale``)."""
    from sago_core.axes.reasoning import with_answers
    from sago_core.axes.text_similarity import get_bert_scorer
    from sago_core.baselines.bertscore import rescaled, run_baseline
    from sago_core.scoring.encoder import Encoder, label_of, run_encoder, saved_config
    from sago_core.scoring.scorer_sensitivity import render_sensitivity, scorer_sensitivity

    samples = ((saved_config(run_dir) or {}).get("generation") or {}).get("samples", 1)
    if samples and int(samples) > 1:
        raise InputError(
            f"is sampled at K = {samples}: its bert deltas are excesses over samples, which "
            "this does not rescore",
            file=str(run_dir),
        )
    scorer = get_bert_scorer(encoder, layer)
    f1 = rescaled(scorer.f1, run_baseline(encoder, layer, rescale))
    found = scorer_sensitivity(
        pl.read_parquet(run_dir / DELTAS_FILE),
        with_answers(pl.read_parquet(run_dir / GENERATIONS_FILE)),
        f1,
    )
    return render_sensitivity(
        found, label_of(run_encoder(run_dir)), Encoder(encoder, layer, rescale).label
    )
