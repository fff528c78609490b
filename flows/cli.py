"""The ``sago`` command line.

``sago run`` evaluates models on datasets. Config comes from a preset, an optional YAML file
(strict: unknown keys are errors) and these overrides, parsed once here. Inputs are checked
before Prefect starts or any model loads. Prefect runs ephemeral (no server) unless
PREFECT_API_URL points at one; its home defaults to ``<runs-dir>/.prefect``, never the
user's home by surprise.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from sago_core.artifacts.layout import REPORT_FILE, SUMMARY_MD_FILE
from sago_core.config import (
    BUILTIN_DATASET,
    DATASET_NAMES,
    RunConfig,
    build_config,
    read_config_file,
)
from sago_core.data.user_files import join_mapped_entries
from sago_core.errors import ConfigError, SagoError


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _ints(text: str) -> list[int]:
    try:
        return [int(part) for part in _csv(text)]
    except ValueError as exc:
        message = f"{text!r} is not a comma-separated list of integers"
        raise argparse.ArgumentTypeError(message) from exc


def _add_run(commands: Any) -> None:
    run = commands.add_parser(
        "run",
        help="evaluate models on datasets (rerunning the same command resumes and reuses work)",
        description="Evaluate models. Later options override the config file, which "
        "overrides the preset.",
    )
    run.add_argument("--config", type=Path, help="YAML config file (strict schema)")
    run.add_argument(
        "--preset",
        choices=("demo", "paper", "locate"),
        help="demo (default), paper grid, or locate (demo + activation patching)",
    )
    run.add_argument(
        "--models",
        type=_csv,
        help="comma-separated BACKEND:ID specs; BACKEND in hf, vllm, litellm; ID a local "
        "path, hub id or API model; alias smollm2-135m = the embedded model "
        "(default hf:smollm2-135m)",
    )
    run.add_argument(
        "--datasets",
        type=_csv,
        help=f"comma-separated names: {BUILTIN_DATASET}, {', '.join(DATASET_NAMES)}, "
        "or paths to .csv/.jsonl/.json/.parquet files with a 'question' column, in a "
        "dataset's own layout, or mapped per file: 'a.csv#question=Question,answer=Best Answer'",
    )
    run.add_argument("--data-dir", type=Path, help="folder laid out like shared/data")
    run.add_argument(
        "--question-column", help="question column of a user's own data file (default question)"
    )
    run.add_argument(
        "--strict-placeholders",
        action="store_true",
        help="placeholder-like text ({name}) in a user's prompt is an error, not a warning",
    )
    run.add_argument("--n", type=int, help="prompts sampled per dataset (seeded)")
    run.add_argument("--max-new-tokens", type=int, help="greedy generation length cap")
    run.add_argument("--seed", type=int, help="run seed (sampling and noise)")
    run.add_argument(
        "--runs-dir", help="where runs/<run_id>/ go: a folder or a store URL (default ./runs)"
    )
    run.add_argument("--run-id", help="run folder name (default: preset + config hash)")
    run.add_argument("--prefect-home", type=Path, help="Prefect home (default <runs-dir>/.prefect)")
    run.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan (prompts, variants, generations, API requests, tokens, cost "
        "ceiling, budget) without loading a model or calling an API",
    )


def run_folder(text: str) -> Path:
    """A run folder argument: a local folder, or a run's URL on an object store (fetched into
    this machine's scratch folder; the command's own outputs go back to the store)."""
    from flows.runtime.object_store import fetch_run_folder

    try:
        return fetch_run_folder(text)
    except SagoError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _add_report(commands: Any) -> None:
    report = commands.add_parser(
        "report",
        help="rebuild report.html of a finished run from its artifacts alone (no model)",
    )
    report.add_argument("run", type=run_folder, help="the run folder (or its store URL)")


def _add_compare(commands: Any) -> None:
    compare = commands.add_parser(
        "compare", help="one report across several finished runs (rankings, reversals)"
    )
    from sago_core.statistics.paired import DEFAULT_MARGIN

    compare.add_argument("runs", type=run_folder, nargs="+", help="run folders (or URLs)")
    compare.add_argument(
        "--out",
        type=Path,
        help="where to write the page (default comparison.html), or with --paired the table "
        "(default paired.parquet; paired.md beside it)",
    )
    compare.add_argument(
        "--paired",
        action="store_true",
        help="two runs, the same prompts: paired t-test, Wilcoxon, bootstrap CI and an "
        "equivalence test per dataset and axis (is B less stable than A?)",
    )
    compare.add_argument(
        "--margin",
        type=float,
        default=DEFAULT_MARGIN,
        help=f"--paired: equivalence margin in SGS units (default {DEFAULT_MARGIN})",
    )
    compare.add_argument(
        "--allow-different-configs",
        action="store_true",
        help="--paired: compare runs whose variant grid, decoding, scorer or seed differ "
        "(the differences are printed)",
    )
    compare.add_argument(
        "--strict-identity",
        action="store_true",
        help="refuse runs whose answers for a model come from different served-model "
        "identities (API model name or system_fingerprint; default: compare and mark them)",
    )


def _add_card(commands: Any) -> None:
    from sago_core.statistics.paired import DEFAULT_MARGIN

    card = commands.add_parser(
        "card",
        help="write the stability card of a finished run (card.md, card.html, card.json)",
    )
    card.add_argument("run", type=run_folder, help="the run folder of the release")
    card.add_argument("--against", type=run_folder, help="the previous release's run folder")
    card.add_argument(
        "--margin", type=float, default=DEFAULT_MARGIN, help="equivalence margin (SGS units)"
    )
    card.add_argument(
        "--allow-different-configs",
        action="store_true",
        help="compare with --against even when comparability settings differ",
    )
    card.add_argument(
        "--strict-identity",
        action="store_true",
        help="refuse an --against run whose answers come from other served-model identities "
        "(default: the card marks them)",
    )


def _add_judge_audit(commands: Any) -> None:
    audit = commands.add_parser(
        "judge-audit", help="human check of the register judge: export a sample, score labels"
    )
    audit.add_argument("action", choices=("export", "score"))
    audit.add_argument("run", type=run_folder, help="a finished run judged with judge.model set")
    audit.add_argument("--out", type=Path, default=Path("judge_audit.csv"))
    audit.add_argument("--labels", type=Path, help="score: the labelled CSV")
    audit.add_argument("--share", type=float, default=0.1, help="export: share of pairs")
    audit.add_argument("--seed", type=int, default=0)


def _add_resume(commands: Any) -> None:
    resume = commands.add_parser(
        "resume",
        help="continue a failed or killed run: only unfinished shards and stages are computed",
    )
    resume.add_argument("run", type=run_folder, help="the run folder (or its store URL)")


def _add_server_setup(commands: Any) -> None:
    server = commands.add_parser(
        "server-setup",
        help="create the work pools, one GPU queue per device and the dead-worker automation "
        "on the Prefect server at PREFECT_API_URL",
    )
    server.add_argument(
        "--devices",
        type=int,
        default=1,
        help="GPU queues device-0..N-1, one per worker (devices / devices_per_worker)",
    )
    server.add_argument(
        "--silence",
        type=int,
        default=600,
        help="seconds without a heartbeat before a run is crashed (workers send one every "
        "PREFECT_FLOWS_HEARTBEAT_FREQUENCY s, default 180)",
    )


def _add_consistency(commands: Any) -> None:
    consistency = commands.add_parser(
        "consistency",
        help="do results on one OOD dataset predict another? (partial correlations across "
        "checkpoints, controlling for the ID dataset)",
    )
    consistency.add_argument("--config", type=Path, required=True, help="YAML study file")


def _add_checkpoints(commands: Any) -> None:
    checkpoints = commands.add_parser(
        "checkpoints", help="make a checkpoint series of a model (fine-tuning or quantisation)"
    )
    checkpoints.add_argument("kind", choices=("finetune", "quantize"))
    checkpoints.add_argument("--base", default="smollm2-135m", help="model id or local folder")
    checkpoints.add_argument("--out", type=Path, required=True, help="folder for the series")
    checkpoints.add_argument(
        "--steps", type=_ints, default=[0, 2, 4, 8], help="finetune: cumulative steps to save"
    )
    checkpoints.add_argument(
        "--bits", type=_ints, default=[32, 8, 6, 4], help="quantize: bit widths to save"
    )
    checkpoints.add_argument("--learning-rate", type=float, default=2e-5)
    checkpoints.add_argument(
        "--datasets",
        type=_csv,
        default=["builtin_train"],
        help="finetune: training questions (default builtin_train: apart from every built-in "
        "evaluation prompt; a study refuses checkpoints trained on what it evaluates)",
    )
    checkpoints.add_argument("--data-dir", type=Path)


def _add_score(commands: Any) -> None:
    """``sago score`` and ``sago export`` (issue 15; options in flows/score_cli.py)."""
    from flows.score_cli import add_export_parser, add_score_parser

    add_score_parser(commands)
    add_export_parser(commands)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sago",
        description="SAGO: does a language model behave the same on meaning-preserving "
        "variants of a prompt? Six signed deltas per prompt and variant, RMS scores, t-tests.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    _add_run(commands)
    _add_report(commands)
    _add_compare(commands)
    _add_card(commands)
    _add_judge_audit(commands)
    _add_resume(commands)
    _add_server_setup(commands)
    _add_consistency(commands)
    _add_checkpoints(commands)
    _add_score(commands)
    return parser


def config_from_args(args: argparse.Namespace) -> RunConfig:
    file_values: dict[str, Any] = read_config_file(args.config) if args.config else {}
    overrides: dict[str, Any] = {
        "models": args.models,
        "datasets": join_mapped_entries(args.datasets) if args.datasets else None,
        "strict_placeholders": True if args.strict_placeholders else None,
        "data_dir": args.data_dir,
        "n": args.n,
        "question_column": args.question_column,
        "seed": args.seed,
        "runs_dir": args.runs_dir,
        "run_id": args.run_id,
        "prefect_home": args.prefect_home,
    }
    if args.max_new_tokens is not None:
        generation = dict(file_values.get("generation") or {})
        generation["max_new_tokens"] = args.max_new_tokens
        overrides["generation"] = generation
    source = f"{args.config} and command line" if args.config else "command line"
    return build_config(args.preset, file_values, overrides, source=source)


def preflight(config: RunConfig) -> None:
    """Everything that can be wrong with the inputs, found before a model loads."""
    from sago_core.backends.api import api_key_from_environment
    from sago_core.backends.model_source import (
        LOCAL_BACKENDS,
        parse_model_spec,
        resolve_local_model,
    )
    from sago_core.data.loading import load_run_prompts

    structural = config.variants.structural
    tools = [structural.rewriter if structural else None, config.judge.model]
    for model in [*config.models, *(t for t in tools if t)]:
        backend = parse_model_spec(model).backend
        if backend == "litellm":
            api_key_from_environment(config.api)  # a named key variable must be set
        elif backend in LOCAL_BACKENDS:
            resolve_local_model(parse_model_spec(model).model_id)
    load_run_prompts(config)
    if config.runs_store:  # bucket, credentials and conditional writes, before any model
        from sago_core.storage.location import parse_store_url
        from sago_core.storage.preflight import check_store

        check_store(parse_store_url(config.runs_store))


def configure_environment(config: RunConfig) -> None:
    """Prefect and hub settings; must run before prefect is imported."""
    home = Path(
        os.environ.get("PREFECT_HOME") or config.prefect_home or config.runs_dir / ".prefect"
    ).resolve()
    home.mkdir(parents=True, exist_ok=True)  # Prefect does not create missing parents
    os.environ["PREFECT_HOME"] = str(home)
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # sago's own loggers (the vLLM worker's forwarded lines among them) reach the UI.
    os.environ.setdefault("PREFECT_LOGGING_EXTRA_LOGGERS", "sago")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


def dry_run_command(config: RunConfig) -> int:
    """The plan of ``config``: inputs are validated as for a run, nothing is loaded or sent."""
    from sago_core.artifacts.layout import RunLayout
    from sago_core.backends.api import token_prices
    from sago_core.backends.target import run_targets
    from sago_core.run_plan import plan_run, render_plan
    from sago_core.stages.prompts import prepare_prompts

    targets = run_targets(config)  # resolves local weights (hashes), loads nothing
    every = [*targets.models.values(), *targets.tools()]
    prices = {t.spec: token_prices(t.model_id, config.api) for t in every if t.is_api}
    layout = RunLayout.of(config.runs_dir, config.resolved_run_id())
    plan = plan_run(config, prepare_prompts(config), targets, layout, prices)
    if prices and config.api.key_env and not os.environ.get(config.api.key_env):
        plan.warnings.append(f"api.key_env {config.api.key_env!r} is not set: a real run stops")
    print(render_plan(plan, config))
    return 0


def run_command(config: RunConfig) -> int:
    preflight(config)
    configure_environment(config)
    from flows.evaluate import evaluate, layout_of
    from flows.runtime.server_outage import resumable_outage

    with resumable_outage(layout_of(config).run_dir):
        run_dir = Path(evaluate(config))
    print((run_dir / SUMMARY_MD_FILE).read_text(encoding="utf-8"))
    print(f"Artifacts: {run_dir}")
    return 0


def check_finished_run(run_dir: Path) -> None:
    from sago_core.artifacts.layout import FINISHED_RUN_FILES
    from sago_core.errors import InputError

    missing = [name for name in FINISHED_RUN_FILES if not (run_dir / name).is_file()]
    if missing:
        raise InputError(f"is not a finished run (missing {', '.join(missing)})", file=str(run_dir))


def report_command(run_dir: Path) -> int:
    from sago_core.artifacts.store import write_text
    from sago_core.report.html import report_from_run

    check_finished_run(run_dir)
    path = write_text(report_from_run(run_dir), run_dir / REPORT_FILE)
    print(f"Report: {path}")
    return 0


def compare_command(run_dirs: list[Path], out: Path, strict_identity: bool = False) -> int:
    from sago_core.artifacts.store import write_text
    from sago_core.report.compare import compare_runs, identity_check

    for run_dir in run_dirs:
        check_finished_run(run_dir)
    identity = identity_check(run_dirs)
    identity.enforce(strict_identity)
    for warning in identity.warnings:
        print(f"WARNING: {warning}")
    path = write_text(compare_runs(run_dirs, identity=identity), out)
    print(f"Comparison: {path}")
    return 0


def paired_command(args: argparse.Namespace) -> int:
    from sago_core.artifacts.layout import PAIRED_FILE, PAIRED_MD_FILE
    from sago_core.artifacts.schemas import PAIRED
    from sago_core.artifacts.store import write_parquet, write_text
    from sago_core.report.paired_runs import compare_paired, render_paired

    if len(args.runs) != 2:
        raise ConfigError(f"--paired compares exactly two runs (A B), got {len(args.runs)}")
    for run_dir in args.runs:
        check_finished_run(run_dir)
    run_a, run_b = args.runs
    comparison = compare_paired(
        run_a, run_b, args.margin, args.allow_different_configs, args.strict_identity
    )
    out = args.out or Path(PAIRED_FILE)
    text = render_paired(comparison)
    write_parquet(comparison.table, out, PAIRED)
    write_text(text, out.with_name(PAIRED_MD_FILE))
    print(text)
    print(f"Paired table: {out}")
    return 0


def card_command(args: argparse.Namespace) -> int:
    from sago_core.report.card import write_card

    for run_dir in [args.run, *([args.against] if args.against else [])]:
        check_finished_run(run_dir)
    paths = write_card(
        args.run,
        args.against,
        args.margin,
        args.allow_different_configs,
        strict_identity=args.strict_identity,
    )
    print(f"Card: {', '.join(str(p) for p in paths)}")
    return 0


def resume_command(run_dir: Path) -> int:
    """The run's own saved configuration, run again: every finished stage and shard is a
    cache hit, so only what the failure or kill left unfinished is computed."""
    import json

    from pydantic import ValidationError

    from sago_core.artifacts.layout import RUN_CONFIG
    from sago_core.errors import InputError

    saved = run_dir / RUN_CONFIG
    if not saved.is_file():
        raise InputError(f"has no {RUN_CONFIG} (not a sago run folder)", file=str(run_dir))
    try:
        config = RunConfig.model_validate(json.loads(saved.read_text(encoding="utf-8")))
    except (ValueError, ValidationError) as exc:
        raise InputError(f"is not a valid run configuration: {exc}", file=str(saved)) from exc
    return run_command(config)


def judge_audit_command(args: argparse.Namespace) -> int:
    import json

    from sago_core.report.judge_audit import export_sample, score_labels

    check_finished_run(args.run)
    if args.action == "export":
        count = export_sample(args.run, args.out, args.share, args.seed)
        print(f"Exported {count} pairs for labelling: {args.out} (fill human_label with 1/0)")
        return 0
    if args.labels is None:
        raise ConfigError("judge-audit score needs --labels LABELLED.csv")
    print(json.dumps(score_labels(args.run, args.labels), indent=2))
    return 0


def consistency_command(path: Path) -> int:
    import time

    from sago_core.consistency.config import build_consistency_config

    study = build_consistency_config(read_config_file(path), source=str(path))
    preflight(study.preflight_config())  # series checkpoints are built by the flow
    configure_environment(study.evaluation)
    from flows.consistency import consistency

    started = time.monotonic()
    run_dir = Path(consistency(study))
    import polars as pl

    from sago_core.artifacts.layout import CONSISTENCY_REPORT_FILE, PARTIAL_CORRELATIONS_FILE
    from sago_core.consistency.summary import pair_markdown

    table = pl.read_parquet(run_dir / PARTIAL_CORRELATIONS_FILE)
    stats = study.statistics
    print(pair_markdown(table, stats.report_metric, stats.adjustment))
    print(f"Consistency: {run_dir / CONSISTENCY_REPORT_FILE} ({time.monotonic() - started:.0f} s)")
    return 0


def checkpoints_command(args: argparse.Namespace) -> int:
    from sago_core.backends.model_source import resolve_local_model
    from sago_core.checkpoints.series import finetune_series, quantize_series
    from sago_core.checkpoints.training_split import TrainingSplit
    from sago_core.consistency.series import training_candidates

    source = resolve_local_model(args.base)
    if args.kind == "quantize":
        saved = quantize_series(source, args.bits, args.out)
    else:
        rows = [p for name in args.datasets for p in training_candidates(name, args.data_dir)]
        split = TrainingSplit(",".join(args.datasets), tuple(p for p in rows if p.references))
        if not split.prompts:
            raise ConfigError(f"datasets {args.datasets} hold no reference answers to train on")
        saved = finetune_series(source, split, args.steps, args.out, args.learning_rate)
    for folder in saved:
        print(f"hf:{folder}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "report":
            return report_command(args.run)
        if args.command == "compare" and args.paired:
            return paired_command(args)
        if args.command == "compare":
            return compare_command(
                args.runs, args.out or Path("comparison.html"), args.strict_identity
            )
        if args.command == "card":
            return card_command(args)
        if args.command == "server-setup":
            from flows.server_setup import setup_server

            for line in setup_server(args.devices, silence_s=args.silence) or ["nothing to do"]:
                print(line)
            return 0
        if args.command == "resume":
            return resume_command(args.run)
        if args.command == "judge-audit":
            return judge_audit_command(args)
        if args.command == "consistency":
            return consistency_command(args.config)
        if args.command == "checkpoints":
            return checkpoints_command(args)
        if args.command in ("score", "export"):
            from flows.score_cli import export_command, score_command

            return score_command(args) if args.command == "score" else export_command(args)
        config = config_from_args(args)
        return dry_run_command(config) if args.dry_run else run_command(config)
    except SagoError as exc:
        print(f"sago: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
