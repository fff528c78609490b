"""``sago run``: evaluate models on datasets (rerunning the same command resumes).

Config comes from a preset, an optional YAML file (strict: unknown keys are errors) and
these overrides, parsed once here. A config with ``generation.temperatures`` is a
temperature sweep: one plain run per temperature (``sago_core/sweep.py``), then the sweep's
page and card in ``<runs-dir>/<sweep id>/``. Inputs are checked before Prefect starts or any model
loads. Prefect runs ephemeral (no server) unless PREFECT_API_URL points at one; its home
defaults to ``<runs-dir>/.prefect`` (``RunLayout``'s ``default_prefect_home``), never the
user's home by surprise. Without a server, sago's temporary Prefect server runs in a session
of its own (``flows.runtime.temporary_server``). SIGTERM or SIGINT stops a run within
seconds and prints how to resume it (``flows.runtime.stopping``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from flows.runtime.stopping import Server, Stopper, stop_on_signals
from sago_cli.common import configure_environment, csv_list, hub_models, preflight
from sago_core.artifacts.layout import REPORT_FILE, SUMMARY_MD_FILE, RunLayout
from sago_core.budget import BUDGET_WITH_SAMPLES
from sago_core.config import (
    BUILTIN_DATASET,
    DATASET_NAMES,
    PRESETS,
    RunConfig,
    build_config,
    read_config_file,
)
from sago_core.data.user_files import join_mapped_entries
from sago_core.errors import ConfigError
from sago_core.registry.backends import backend_names
from sago_core.run_plan import RunPlan
from sago_core.run_start import start_line
from sago_core.site.paths import INDEX, SITE_DIR
from sago_core.sweep import is_sweep, sweep_arms, sweep_id, sweep_record


def add_parser(commands: Any) -> None:
    run = commands.add_parser(
        "run",
        help="evaluate models on datasets (rerunning the same command resumes and reuses work)",
        description="Evaluate models. Later options override the config file, which "
        "overrides the preset.",
    )
    run.add_argument("--config", type=Path, help="YAML config file (strict schema)")
    run.add_argument(
        "--preset",
        choices=tuple(PRESETS),
        help="demo (default), paper grid, locate (demo + activation patching), or sampling "
        "(demo at T 0.7 with 8 samples per prompt text)",
    )
    run.add_argument(
        "--models",
        type=csv_list,
        help=f"comma-separated BACKEND:ID specs; BACKEND in {', '.join(backend_names())}; "
        "ID a local "
        "path, hub id or API model; alias smollm2-135m = the embedded model "
        "(default hf:smollm2-135m)",
    )
    run.add_argument(
        "--datasets",
        type=csv_list,
        help=f"comma-separated names: {BUILTIN_DATASET}, {', '.join(DATASET_NAMES)}, "
        "or paths to .csv/.jsonl/.json/.parquet files with a 'question' column, in a "
        "dataset's own layout, or mapped per file: 'a.csv#question=Question,answer=Best Answer'",
    )
    run.add_argument(
        "--data-dir",
        type=Path,
        help="folder holding the named datasets' files, one subfolder per dataset name",
    )
    run.add_argument(
        "--question-column", help="question column of a user's own data file (default question)"
    )
    run.add_argument(
        "--strict-placeholders",
        action="store_true",
        help="placeholder-like text ({name}) in a user's prompt is an error, not a warning",
    )
    run.add_argument(
        "--n", type=int, help=f"prompts sampled per dataset (seeded; {preset_defaults('n')})"
    )
    run.add_argument(
        "--max-new-tokens",
        type=int,
        help=f"generation length cap ({preset_defaults('generation.max_new_tokens')})",
    )
    run.add_argument(
        "--seed", type=int, help=f"run seed (sampling and noise; {preset_defaults('seed')})"
    )
    run.add_argument(
        "--runs-dir", help="where runs/<run_id>/ go: a folder or a store URL (default ./runs)"
    )
    run.add_argument("--run-id", help="run folder name (default: preset + config hash)")
    run.add_argument("--prefect-home", type=Path, help="Prefect home (default <runs-dir>/.prefect)")
    run.add_argument(
        "--budget",
        type=float,
        metavar="FRACTION",
        help="budgeted run: ask for at most this share of the grid's cells, in (0, 1], in "
        "rounds that stop once the verdicts are known",
    )
    run.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan (prompts, variants, generations, API requests, tokens, cost "
        "ceiling, budget) without loading a model or calling an API",
    )


def preset_defaults(key: str) -> str:
    """``default: demo 2, paper 500, ...``: a dotted config key's value in each preset."""
    values = []
    for name, preset in PRESETS.items():
        value: Any = preset
        for part in key.split("."):
            value = getattr(value, part)
        values.append(f"{name} {value}")
    return "default: the preset's, " + ", ".join(values)


def command(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    if config.budget is not None and config.generation.samples > 1:
        raise ConfigError(BUDGET_WITH_SAMPLES)
    return dry_run_command(config) if args.dry_run else run_command(config)


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
    if args.budget is not None:
        budget = {k: v for k, v in (file_values.get("budget") or {}).items() if k != "generations"}
        overrides["budget"] = {**budget, "fraction": args.budget}
    if args.max_new_tokens is not None:
        generation = dict(file_values.get("generation") or {})
        generation["max_new_tokens"] = args.max_new_tokens
        overrides["generation"] = generation
    source = f"{args.config} and command line" if args.config else "command line"
    return build_config(args.preset, file_values, overrides, source=source)


def dry_run_command(config: RunConfig) -> int:
    """The plan of ``config``: inputs are validated as for a run, nothing is loaded or sent
    (a temperature sweep: each arm's plan, in rising temperature)."""
    if is_sweep(config):
        arms = sweep_arms(config)
        print(f"Temperature sweep {sweep_id(config, arms)}: {len(arms)} runs, one per arm")
        for arm in arms:
            print(f"\nArm T {arm.temperature:g} (K {arm.samples}):")
            dry_run_command(arm.config)
        return 0
    from sago_core.backends.hub_check import uncached_warning
    from sago_core.run_plan import render_plan

    plan = plan_of(config)
    if plan.api and config.api.key_env and not os.environ.get(config.api.key_env):
        plan.warnings.append(f"api.key_env {config.api.key_env!r} is not set: a real run stops")
    uncached = (uncached_warning(model_id) for model_id in hub_models(config))
    plan.warnings.extend(line for line in uncached if line)
    print(render_plan(plan, config))
    return 0


def plan_of(config: RunConfig) -> RunPlan:
    """What ``config`` will do (prompts, variants, generations, API traffic and its price),
    loading no model and calling no API: the dry run's plan and a run's first line."""
    from sago_core.backends.api import token_prices
    from sago_core.backends.target import run_targets
    from sago_core.run_plan import plan_run
    from sago_core.stages.prompts import prepare_prompts

    targets = run_targets(config)  # resolves local weights (hashes), loads nothing
    every = [*targets.models.values(), *targets.tools()]
    prices = {t.spec: token_prices(t.model_id, config.api) for t in every if t.is_api}
    layout = RunLayout.of(config.runs_dir, config.resolved_run_id())
    return plan_run(config, prepare_prompts(config), targets, layout, prices)


def run_command(config: RunConfig) -> int:
    """Preflight, then the evaluation flow; ``sago resume`` runs a saved config through it
    (a temperature sweep's too)."""
    from sago_core.backends.hub_check import require_bertscore_encoder

    require_bertscore_encoder(config.bertscore.model)  # named, with how to point at a copy
    if is_sweep(config):
        return sweep_command(config)
    with stoppable(config) as stopper:
        preflight(config)
        print(start_line(plan_of(config), config), flush=True)  # before anything starts
        configure_environment(config)
        stopper.server = temporary_server()
        run_dir = evaluate_run(config)
    print((run_dir / SUMMARY_MD_FILE).read_text(encoding="utf-8"))
    print(f"Artifacts: {run_dir}")
    report = run_dir / REPORT_FILE
    if report.is_file():
        print(f"Report: {report}")
    site = run_dir.parent / SITE_DIR / INDEX
    if site.is_file():  # a watch built one over this runs folder
        print(f"Site: {site} (add this run: sago site {run_dir.parent})")
    return 0


@contextlib.contextmanager
def stoppable(config: RunConfig) -> Iterator[Stopper]:
    """SIGTERM or SIGINT stops the run within seconds: its flow run marked Crashed, its
    workers then its temporary server stopped, one line saying how to resume it, exit 130
    (SIGINT) or 143 (SIGTERM); a second signal exits at once (``flows.runtime.stopping``)."""
    with stop_on_signals(lambda: stop_line(config)) as stopper:
        yield stopper


def stop_line(config: RunConfig) -> str:
    """The one line a stopped run prints: how to resume it (a sweep: its own folder), as the
    user named its runs folder (relative, or the store's URL)."""
    run_id = sweep_id(config, sweep_arms(config)) if is_sweep(config) else config.resolved_run_id()
    if not RunLayout.of(config.runs_dir, run_id).run_config.is_file():
        return "stopped before the run saved anything; run the same command again"
    place = f"{config.runs_store.rstrip('/')}/{run_id}" if config.runs_store else None
    return f"stopped; resume with: sago resume {place or config.runs_dir / run_id}"


def temporary_server() -> Server | None:
    """sago's temporary Prefect server (in a session of its own), registered before Prefect
    first needs one; None with a server of the user's (PREFECT_API_URL), for which Prefect's
    server application is not even imported."""
    from flows.runtime.server_outage import api_url

    if api_url() is not None:
        return None
    from flows.runtime.temporary_server import own_temporary_server

    return own_temporary_server()


def evaluate_run(config: RunConfig) -> Path:
    """One run through the evaluation flow (a Prefect outage leaves it resumable)."""
    from flows.evaluate import evaluate, layout_of
    from flows.runtime.server_outage import resumable_outage

    with resumable_outage(layout_of(config).run_dir):
        return Path(evaluate(config))


def sweep_command(config: RunConfig) -> int:
    """A temperature sweep, after the preflight its arms share (models, data and store;
    only decoding differs): ``run_sweep`` through the evaluation flow."""
    with stoppable(config) as stopper:
        preflight(sweep_arms(config)[0].config)
        configure_environment(config)
        stopper.server = temporary_server()
        run_sweep(config, evaluate_run)
    return 0


def run_sweep(config: RunConfig, evaluate_arm: Callable[[RunConfig], Path]) -> list[Path]:
    """Every arm as the plain run it is (``sago_core/sweep.py``; an arm whose run exists is
    a cache hit, stage by stage), in rising temperature, then the sweep's page and card in
    its own folder; returns their paths. The sweep's configuration is saved there first, so
    ``sago resume`` on the sweep folder continues the sweep."""
    from sago_core.artifacts.store import write_json
    from sago_core.report.sweep import ArmRun, write_sweep
    from sago_core.report.sweep_card import write_sweep_card

    arms = sweep_arms(config)
    sweep = RunLayout.of(config.runs_dir, sweep_id(config, arms))
    write_json(sweep_record(config), sweep.run_config)
    finished = []
    for arm in arms:
        print(f"Arm T {arm.temperature:g} (K {arm.samples}): run {arm.run_id}")
        run_dir = evaluate_arm(arm.config)
        finished.append(ArmRun(arm.temperature, arm.samples, arm.run_id, run_dir))
        print(f"Artifacts: {run_dir}")
    data, page = write_sweep(sweep.run_dir, finished)
    cards = write_sweep_card(sweep.run_dir)
    print(f"Sweep: {page} ({data.name}); card: {', '.join(str(p) for p in cards)}")
    return [data, page, *cards]
