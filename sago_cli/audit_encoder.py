"""``sago audit encoder`` and ``sago audit bertscore-baseline``: the BERTScore encoder behind
the ``bert`` axis, checked against a second encoder (``sago_core/audits/encoder_sensitivity.py``)
and given its rescaling baseline (``sago_core/axes/bertscore_baseline.py``)."""

from __future__ import annotations

import argparse
from typing import Any

from sago_cli.common import check_finished_run, int_list
from sago_cli.options import add_output, add_run

CHECKS = ("encoder", "bertscore-baseline")
EMBEDDED = "minilm-l6"


def add_parsers(checks: Any) -> None:
    encoder = checks.add_parser(
        "encoder",
        help="a run's SGS-BERT under a second BERTScore encoder, and the rank agreement of the two",
    )
    add_run(encoder)
    encoder.add_argument(
        "--encoder", default=EMBEDDED, help="encoder B: an alias, a hub id or a local folder"
    )
    encoder.add_argument("--layer", type=int, required=True, help="encoder B's layer")
    encoder.add_argument("--rescale", action="store_true", help="rescale B with its baseline")
    add_output(encoder, "the Markdown table too", suffixes=(".md",))
    baseline = checks.add_parser(
        "bertscore-baseline",
        help="compute an encoder's BERTScore rescaling baseline on unrelated sentence pairs "
        "(bertscore.rescale_with_baseline reads it)",
    )
    baseline.add_argument(
        "--encoder", default=EMBEDDED, help="the encoder: an alias, a hub id or a local folder"
    )
    baseline.add_argument(
        "--layers", type=int_list, default=list(range(7)), help="the layers (0: the embeddings)"
    )
    add_output(
        baseline,
        "the baseline: .tsv in bert-score's format, or .py for the shipped table's module",
        suffixes=(".tsv", ".py"),
        required=True,
    )


def command(args: argparse.Namespace) -> int:
    if args.check == "encoder":
        from sago_core.audits.encoder_sensitivity import encoder_sensitivity

        check_finished_run(args.run)
        text = encoder_sensitivity(args.run, args.encoder, args.layer, args.rescale)
        print(text)
        if args.out:
            args.out.write_text(text, encoding="utf-8")
        return 0
    from sago_core.axes.bertscore_baseline import baselines, render_table, render_tsv, sentences

    rows = baselines(args.encoder, args.layers)
    if args.out.suffix == ".py":
        text = render_table(args.encoder, rows, len(sentences()))
    else:
        text = render_tsv(rows)
    args.out.write_text(text, encoding="utf-8")
    for layer, (p, r, f) in rows.items():
        print(f"layer {layer}: P {p:.4f} R {r:.4f} F {f:.4f}")
    print(f"Wrote {args.out}")
    return 0
