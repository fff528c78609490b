"""The BERTScore rescaling baseline of an encoder, bert-score's way (``sago audit
bertscore-baseline``).

bert-score's ``rescale_with_baseline`` files (``bert_score/rescale_baseline/<lang>/<model>.tsv``)
hold, per layer, the mean precision, recall and F1 of pairs of unrelated sentences drawn from
a monolingual corpus; a score is then rescaled as (score - baseline) / (1 - baseline), so 0
reads "as alike as two unrelated sentences". bert-score ships no file for all-MiniLM-L6-v2, so
sago computes one on ``sago_core/baselines/baseline_sentences.txt`` (119 unrelated English
sentences written for sago, CC0): every unordered pair of distinct sentences, scored in both
orders (candidate and reference swapped), at every layer asked (0: the embeddings), without
idf weighting (as sago scores answers). The shipped table
(``sago_core/baselines/bertscore_table.py``) is this module's ``.py`` output; another encoder's
is written as bert-score's TSV (LAYER, P, R, F).
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import combinations
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[1] / "baselines" / "baseline_sentences.txt"
Row = tuple[float, float, float]


def sentences(path: Path = CORPUS) -> list[str]:
    """The corpus' sentences: one a line, blank lines and ``#`` comments left out."""
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def baseline(texts: list[str], encoder: str, layer: int) -> Row:
    """Mean P, R, F1 over every ordered pair of distinct sentences at ``layer``."""
    from bert_score import BERTScorer

    from sago_core.backends.model_source import resolve_bertscore_model

    pairs = [(a, b) for a, b in combinations(texts, 2)]
    pairs += [(b, a) for a, b in pairs]
    scorer = BERTScorer(
        model_type=resolve_bertscore_model(encoder), num_layers=layer, lang=None, batch_size=64
    )
    p, r, f = scorer.score([a for a, _ in pairs], [b for _, b in pairs])
    return float(p.mean()), float(r.mean()), float(f.mean())


def baselines(encoder: str, layers: Iterable[int], corpus: Path = CORPUS) -> dict[int, Row]:
    texts = sentences(corpus)
    return {layer: baseline(texts, encoder, layer) for layer in layers}


def render_tsv(rows: dict[int, Row]) -> str:
    """bert-score's baseline file format."""
    lines = [
        "LAYER,P,R,F",
        *(f"{layer},{p:.6f},{r:.6f},{f:.6f}" for layer, (p, r, f) in rows.items()),
    ]
    return "\n".join(lines) + "\n"


def render_table(encoder: str, rows: dict[int, Row], n_sentences: int) -> str:
    """The shipped table's module text (``sago_core/baselines/bertscore_table.py``)."""
    n_pairs = n_sentences * (n_sentences - 1)
    lines = "\n".join(
        f"        {layer}: ({p:.6f}, {r:.6f}, {f:.6f})," for layer, (p, r, f) in rows.items()
    )
    return f'''"""BERTScore rescaling baselines: per encoder and layer, the mean (P, R, F1) of
unrelated sentence pairs (bert-score's method). Written by ``sago audit bertscore-baseline``
from ``sago_core/baselines/baseline_sentences.txt`` ({n_sentences} sentences, {n_pairs}
ordered pairs, no idf); do not edit by hand. bert-score ships its own files for roberta-large
and the other hub encoders (``bert_score/rescale_baseline/en``); this one is for the embedded
encoder.
"""

from __future__ import annotations

CORPUS = "sago_core/baselines/baseline_sentences.txt"
BASELINES: dict[str, dict[int, tuple[float, float, float]]] = {{
    "{encoder}": {{
{lines}
    }},
}}
'''
