"""Compute the BERTScore rescaling baseline of the embedded encoder, bert-score's way.

bert-score's ``rescale_with_baseline`` files (``bert_score/rescale_baseline/<lang>/<model>.tsv``)
hold, per layer, the mean precision, recall and F1 of pairs of unrelated sentences drawn from
a monolingual corpus; a score is then rescaled as (score - baseline) / (1 - baseline), so 0
reads "as alike as two unrelated sentences". bert-score ships no file for all-MiniLM-L6-v2, so
this script computes one on ``bench/data/baseline_sentences.txt`` (119 unrelated English
sentences written for sago, CC0): every unordered pair of distinct sentences (7,021), scored
in both orders (candidate and reference swapped), at every layer of the encoder (0: the
embeddings), without idf weighting (as sago scores answers). It writes
``sago_core/baselines/bertscore_table.py``; run it again only when the encoder or the corpus
changes:

    python -m bench.bert_baseline            # about a minute on 2 CPU cores
"""

from __future__ import annotations

import argparse
from itertools import combinations
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "bench" / "data" / "baseline_sentences.txt"
OUT = ROOT / "sago_core" / "baselines" / "bertscore_table.py"
ALIAS = "minilm-l6"
LAYERS = range(0, 7)  # all-MiniLM-L6-v2: the embeddings and six transformer layers


def sentences(path: Path) -> list[str]:
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def baseline(texts: list[str], layer: int) -> tuple[float, float, float]:
    """Mean P, R, F1 over every ordered pair of distinct sentences at ``layer``."""
    from bert_score import BERTScorer

    from sago_core.backends.model_source import resolve_bertscore_model

    pairs = [(a, b) for a, b in combinations(texts, 2)]
    pairs += [(b, a) for a, b in pairs]
    scorer = BERTScorer(
        model_type=resolve_bertscore_model(ALIAS), num_layers=layer, lang=None, batch_size=64
    )
    p, r, f = scorer.score([a for a, _ in pairs], [b for _, b in pairs])
    return float(p.mean()), float(r.mean()), float(f.mean())


def render(rows: dict[int, tuple[float, float, float]], n_sentences: int, n_pairs: int) -> str:
    lines = "\n".join(
        f"        {layer}: ({p:.6f}, {r:.6f}, {f:.6f})," for layer, (p, r, f) in rows.items()
    )
    return f'''"""BERTScore rescaling baselines: per encoder and layer, the mean (P, R, F1) of
unrelated sentence pairs (bert-score's method). Written by ``bench/bert_baseline.py`` from
``bench/data/baseline_sentences.txt`` ({n_sentences} sentences, {n_pairs} ordered pairs, no
idf); do not edit by hand. bert-score ships its own files for roberta-large and the other
hub encoders (``bert_score/rescale_baseline/en``); this one is for the embedded encoder.
"""

from __future__ import annotations

CORPUS = "bench/data/baseline_sentences.txt"
BASELINES: dict[str, dict[int, tuple[float, float, float]]] = {{
    "{ALIAS}": {{
{lines}
    }},
}}
'''


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    texts = sentences(CORPUS)
    rows = {layer: baseline(texts, layer) for layer in LAYERS}
    n_pairs = len(texts) * (len(texts) - 1)
    args.out.write_text(render(rows, len(texts), n_pairs), encoding="utf-8")
    for layer, (p, r, f) in rows.items():
        print(f"layer {layer}: P {p:.4f} R {r:.4f} F {f:.4f}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
