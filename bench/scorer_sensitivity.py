"""The scorer-sensitivity table of a finished run: its SGS-BERT under its own BERTScore encoder
(A) and under a second one (B), and their rank agreement (``sago_core/scoring/
scorer_sensitivity.py``).

B is a BERTScore encoder given by name and layer (offline: the embedded ``minilm-l6`` at
another layer, or any local folder), optionally rescaled with its baseline; say which it is
when you report the numbers. A run sampled at K > 1 is refused (its bert deltas are excesses
over samples, which this does not rescore).

    python -m bench.scorer_sensitivity runs/demo-... --model minilm-l6 --layer 4
    python -m bench.scorer_sensitivity runs/demo-... --model minilm-l6 --layer 6 --rescale
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import polars as pl

from sago_core.artifacts.layout import DELTAS_FILE, GENERATIONS_FILE
from sago_core.axes.reasoning import with_answers
from sago_core.axes.text_similarity import get_bert_scorer
from sago_core.baselines.bertscore import rescaled, run_baseline
from sago_core.scoring.encoder import Encoder, label_of, run_encoder, saved_config
from sago_core.scoring.scorer_sensitivity import render_sensitivity, scorer_sensitivity


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a finished run folder")
    parser.add_argument("--model", default="minilm-l6", help="encoder B (alias, hub id, folder)")
    parser.add_argument("--layer", type=int, required=True, help="encoder B's layer")
    parser.add_argument("--rescale", action="store_true", help="rescale B with its baseline")
    parser.add_argument("--out", type=Path, help="write the Markdown table here too")
    args = parser.parse_args(argv)
    samples = ((saved_config(args.run) or {}).get("generation") or {}).get("samples", 1)
    if samples and int(samples) > 1:
        print(
            f"{args.run}: sampled at K = {samples}: its bert deltas are excesses over "
            "samples, which this does not rescore",
            file=sys.stderr,
        )
        return 2
    scorer = get_bert_scorer(args.model, args.layer)
    f1 = rescaled(scorer.f1, run_baseline(args.model, args.layer, args.rescale))
    found = scorer_sensitivity(
        pl.read_parquet(args.run / DELTAS_FILE),
        with_answers(pl.read_parquet(args.run / GENERATIONS_FILE)),
        f1,
    )
    text = render_sensitivity(
        found, label_of(run_encoder(args.run)), Encoder(args.model, args.layer, args.rescale).label
    )
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
