"""BERTScore rescaled with a baseline (bert-score's ``rescale_with_baseline``).

A baseline b is the mean F1 of pairs of unrelated sentences under one encoder and layer; a
rescaled score is (F1 - b) / (1 - b): 1 for identical texts, 0 for texts as alike as two
unrelated sentences (negative below that). Raw F1 of different encoders live on different
ranges (unrelated pairs: 0.14 at all-MiniLM-L6-v2's layer 6, 0.83 at roberta-large's layer
17), so a rescaled F1 reads alike across encoders; it stays one encoder's number.

The rescaling is linear, so it multiplies every BERT delta (F1 - 1) and every BERT distance
(1 - F1) by 1 / (1 - b): SGS on the ``bert`` axis, its interval and the excess at K > 1 scale
by that factor and every ranking stays; what moves is the number against a fixed tolerance
(the t-test of E[s] > 0.05). The semantic spread's threshold is rescaled with the scores,
so the clusters stay the same.

Baselines: the embedded encoder's from ``bertscore_table.py`` (computed by
``sago audit bertscore-baseline``); a hub encoder's from bert-score's own files
(``bert_score/rescale_baseline/en/<model>.tsv``), read without importing bert-score. A local
folder or an encoder with neither has none, and asking to rescale it is an error.
"""

from __future__ import annotations

import csv
import importlib.util
import math
from collections.abc import Callable, Sequence
from pathlib import Path

from sago_core.baselines.bertscore_table import BASELINES

F1Fn = Callable[[Sequence[str], Sequence[str]], list[float]]


def _bert_score_file(model: str) -> Path | None:
    spec = importlib.util.find_spec("bert_score")
    if spec is None or spec.origin is None or "/" in model or model.startswith((".", "~")):
        return None  # bert-score names its files by bare model name
    path = Path(spec.origin).parent / "rescale_baseline" / "en" / f"{model}.tsv"
    return path if path.is_file() else None


def baseline_f1(model: str, num_layers: int) -> float | None:
    """The F1 baseline of ``model`` (an alias or hub id) at layer ``num_layers``; None
    when none is shipped."""
    if model in BASELINES:
        return BASELINES[model].get(num_layers, (None, None, None))[2]
    path = _bert_score_file(model)
    if path is None:
        return None
    with path.open(encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            if int(row["LAYER"]) == num_layers:
                return float(row["F"])
    return None


def no_baseline(model: str, num_layers: int) -> str:
    return (
        f"bertscore.rescale_with_baseline: no baseline for {model!r} at layer {num_layers} "
        f"(shipped: {', '.join(sorted(BASELINES))} and bert-score's English hub encoders; "
        "compute one in bert-score's format for its rescale_baseline/en folder with: "
        "sago audit bertscore-baseline --encoder MODEL --out MODEL.tsv)"
    )


def rescale(f1: float, baseline: float) -> float:
    """(F1 - b) / (1 - b); NaN stays NaN (a pair not scored)."""
    return f1 if math.isnan(f1) else (f1 - baseline) / (1.0 - baseline)


def rescaled(f1: F1Fn, baseline: float | None) -> F1Fn:
    """``f1`` with every score rescaled by ``baseline``; ``f1`` itself when None."""
    if baseline is None:
        return f1

    def scored(candidates: Sequence[str], references: Sequence[str]) -> list[float]:
        return [rescale(v, baseline) for v in f1(candidates, references)]

    return scored


def run_baseline(model: str, num_layers: int, rescale_with_baseline: bool) -> float | None:
    """The baseline a run rescales with (None: it does not rescale); an error when it asks
    to and none is shipped."""
    if not rescale_with_baseline:
        return None
    found = baseline_f1(model, num_layers)
    if found is None:
        raise ValueError(no_baseline(model, num_layers))
    return found
