"""``sago score``: score generations made elsewhere (CSV, JSONL or Parquet) with the stages
after generation; the same artifacts as ``sago run``."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sago_cli.common import configure_environment
from sago_core.artifacts.layout import SUMMARY_MD_FILE
from sago_core.config import RunConfig, build_config, read_config_file
from sago_core.external.columns import parse_mapping
from sago_core.external.dove import parse_base_where
from sago_core.external.options import FORMATS, ExternalSource


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
        "--generations",
        type=Path,
        required=True,
        help="the file to score, or a folder of the SAGO reference code's results (every "
        "full_results_all_models.csv beneath it, pooled by model and dataset)",
    )
    score.add_argument(
        "--model", help="BACKEND:ID of a local model for Act/Prob/Ent (e.g. hf:smollm2-135m)"
    )
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
    score.add_argument(
        "--runs-dir", help="where runs/<run_id>/ go: a folder or a store URL (default ./runs)"
    )
    score.add_argument("--run-id", help="run folder name (default: score + a content hash)")
    score.add_argument("--prefect-home", type=Path, help="Prefect home")


def score_inputs(args: argparse.Namespace) -> tuple[RunConfig, ExternalSource]:
    file_values: dict[str, Any] = read_config_file(args.config) if args.config else {}
    overrides: dict[str, Any] = {
        "models": [args.model] if args.model else None,
        "runs_dir": args.runs_dir,
        "run_id": args.run_id,
        "prefect_home": args.prefect_home,
    }
    config = build_config(args.preset, file_values, overrides)
    source = ExternalSource(
        path=args.generations,
        format=args.format,
        columns=parse_mapping(args.columns),
        family=args.family,
        subtype=args.subtype,
        base_where=parse_base_where(args.base_where),
        model=args.model,
        max_prompt_chars=config.max_prompt_chars,
    )
    return config, source


def pool_reference_folder(
    config: RunConfig, source: ExternalSource, say: Callable[[str], object] = print
) -> ExternalSource:
    """A folder of the SAGO reference code's results, pooled into one CSV (in the runs
    folder's cache) that is then scored as one file; says what it holds and which repeated
    runs are left out, and why."""
    from sago_core.artifacts.layout import CacheLayout
    from sago_core.errors import ConfigError
    from sago_core.external.reference_folder import pool_folder
    from sago_core.external.reference_runs import describe

    if source.format not in (None, "sago-reference"):
        raise ConfigError(
            f"--generations {source.path} is a folder: a folder is read as the SAGO reference "
            f"code's results, not as --format {source.format}"
        )
    if source.family or source.subtype:
        raise ConfigError(
            f"--generations {source.path} is a folder: its run folders name their families "
            "(run_<model>_<dataset>_<family>_<stamp>); --family and --subtype are for one file"
        )
    out_dir = CacheLayout.of(config.runs_dir).materialised / "reference"
    pooled = pool_folder(source.path, out_dir, source)
    say(f"Pooled {source.path}: {pooled.summary()}")
    for duplicate in pooled.duplicates:
        say(describe(duplicate))
    return source.model_copy(update={"path": pooled.path, "format": "sago-reference"})


def command(args: argparse.Namespace) -> int:
    from sago_core.backends.hub_check import require_models
    from sago_core.backends.model_source import parse_model_spec, resolve_local_model
    from sago_core.errors import InputError
    from sago_core.external.read import read_external
    from sago_core.registry.backends import local_backends

    config, source = score_inputs(args)
    require_models(config.bertscore.model, [source.model, config.judge.model])  # before any work
    if source.path.is_dir():
        source = pool_reference_folder(config, source)
    table = read_external(source)  # every problem of the file, before Prefect starts
    if args.format is not None and table.format != args.format:
        raise InputError(
            f"is not in the {args.format!r} format (it reads as {table.format!r})",
            file=str(source.path),
        )
    if source.model and parse_model_spec(source.model).backend in local_backends():
        resolve_local_model(parse_model_spec(source.model).model_id)
    configure_environment(config)
    from flows.score import score

    run_dir = Path(score(source, config))
    print((run_dir / SUMMARY_MD_FILE).read_text(encoding="utf-8"))
    for note, count in table.notes.items():
        print(f"{note}: {count}")
    print(f"Read {len(table.rows)} responses as {table.format!r} from {source.path}")
    print(f"Artifacts: {run_dir}")
    return 0
