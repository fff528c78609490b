"""``sago score FILE``: score generations made elsewhere (CSV, JSONL, Parquet, an inspect_ai
log, or a folder of the SAGO reference code's results) with the stages after generation;
the same artifacts as ``sago run``. The work is ``sago.score``'s."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from sago.scoring import pool_reference_folder
from sago_cli.options import add_model, add_run_place
from sago_core.config import RunConfig
from sago_core.external.options import FORMATS, ExternalSource

__all__ = ["add_parser", "command", "pool_reference_folder", "score_inputs"]


def add_parser(commands: Any) -> None:
    score = commands.add_parser(
        "score",
        help="score generations made elsewhere (CSV, JSON, JSONL, Parquet or an inspect_ai "
        ".eval log): the stages after generation, the same artifacts as `sago run`",
        description="Read externally generated base and variant responses and run pair "
        "scores, mirroring, deltas, scores, summary and report on them. Without --model, "
        "Act, Prob and Ent are missing; with a local model its teacher-forced pass scores "
        "each base response under the base and variant prompts.",
    )
    score.add_argument(
        "generations",
        type=Path,
        metavar="FILE",
        help="the file to score, or a folder of the SAGO reference code's results (every "
        "full_results_all_models.csv beneath it, pooled by model and dataset)",
    )
    add_model(score, "a local model whose teacher-forced pass adds Act, Prob and Ent")
    score.add_argument(
        "--format", choices=FORMATS, help="the file's format (default: from its content)"
    )
    score.add_argument(
        "--columns", help="schema=file column pairs, e.g. prompt_text=question,response_text=out"
    )
    score.add_argument("--family", help="variant family where the file does not carry it")
    score.add_argument("--subtype", help="variant subtype where the file does not carry it")
    score.add_argument(
        "--base-where",
        help="DOVE: dimension=value pairs that pick each sample's base row (a value keeps "
        "its spaces: 'separator=; '; dim.field reads a struct's field); lm-eval and inspect: "
        "task=NAME, the base template (default: the file's first)",
    )
    score.add_argument("--config", type=Path, help="YAML config (bertscore, statistics, ...)")
    score.add_argument("--preset", choices=("demo", "paper"), help="settings (default demo)")
    add_run_place(score, "score + a content hash")


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "format": args.format,
        "columns": args.columns,
        "family": args.family,
        "subtype": args.subtype,
        "base_where": args.base_where,
        "preset": args.preset,
        "config": args.config,
        "runs_dir": args.runs_dir,
        "run_id": args.run_id,
        "prefect_home": args.prefect_home,
    }


def score_inputs(args: argparse.Namespace) -> tuple[RunConfig, ExternalSource]:
    from sago.scoring import score_inputs as inputs

    return inputs(args.generations, args.model, **_settings(args))


def command(args: argparse.Namespace) -> int:
    from sago import score

    result = score(args.generations, args.model, **_settings(args))
    print(f"Artifacts: {result.folder}")
    return 0
