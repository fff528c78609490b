"""BERTScore rescaling baselines: per encoder and layer, the mean (P, R, F1) of
unrelated sentence pairs (bert-score's method). Written by ``sago audit bertscore-baseline``
from ``sago_core/baselines/baseline_sentences.txt`` (119 sentences, 14042
ordered pairs, no idf); do not edit by hand. bert-score ships its own files for roberta-large
and the other hub encoders (``bert_score/rescale_baseline/en``); this one is for the embedded
encoder.
"""

from __future__ import annotations

CORPUS = "sago_core/baselines/baseline_sentences.txt"
BASELINES: dict[str, dict[int, tuple[float, float, float]]] = {
    "minilm-l6": {
        0: (0.345563, 0.345563, 0.344211),
        1: (0.421374, 0.421374, 0.420408),
        2: (0.433862, 0.433862, 0.433148),
        3: (0.427052, 0.427052, 0.426522),
        4: (0.439360, 0.439360, 0.438913),
        5: (0.492875, 0.492875, 0.491898),
        6: (0.144047, 0.144057, 0.143290),
    },
}
