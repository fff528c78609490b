"""Evaluating models: ``run`` builds a configuration and runs it through the evaluation flow,
``resume`` continues a saved run, ``dry_run`` prints what a run would do.

A configuration comes from a preset, an optional YAML file (strict: unknown keys are errors)
and keyword overrides, merged once here. A config with ``generation.temperatures`` is a
temperature sweep: one plain run per temperature (``sago_core/sweep.py``), then the sweep's
page and card in ``<runs_dir>/<sweep id>/``. Inputs are checked before Prefect starts or any
model loads. Prefect runs ephemeral (no server) unless PREFECT_API_URL points at one; its home
defaults to ``<runs_dir>/.prefect``. Without a server, sago's temporary Prefect server runs in
a session of its own (``flows.runtime.temporary_server``). SIGTERM or SIGINT stops a run
within seconds and prints how to resume it (``flows.runtime.stopping``).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sago.environment import configure_environment, hub_models, preflight
from sago.result import RunResult, load
from sago_core.artifacts.layout import RunLayout
from sago_core.config import RunConfig, build_config, read_config_file
from sago_core.errors import ConfigError, InputError
from sago_core.sweep import is_sweep, sweep_arms, sweep_id, sweep_record

if TYPE_CHECKING:
    from sago.flows.runtime.stopping import Server, Stopper
    from sago_core.run_plan import RunPlan


def configure(
    models: Sequence[str] | None = None,
    datasets: str | Sequence[str] | None = None,
    n: int | None = None,
    max_new_tokens: int | None = None,
    *,
    preset: str | None = None,
    config: Path | str | Mapping[str, Any] | None = None,
    source: str = "sago.run",
    **overrides: Any,
) -> RunConfig:
    """The strict run configuration: the preset, then ``config`` (a YAML file or a mapping of
    its keys), then the arguments and ``overrides`` (any top-level config key; a section as a
    mapping of its keys, merged into the file's). Errors name the field."""
    values: dict[str, Any] = {}
    if isinstance(config, Mapping):
        values = dict(config)
    elif config is not None:
        values = read_config_file(Path(config))
        source = f"{config} and {source}"
    given: dict[str, Any] = {
        "models": list(models) if models is not None else None,
        "datasets": [datasets] if isinstance(datasets, str) else datasets,
        "n": n,
        **overrides,
    }
    if max_new_tokens is not None:
        given["generation"] = {**(given.get("generation") or {}), "max_new_tokens": max_new_tokens}
    return build_config(preset, values, given, source=source)


def run(
    models: Sequence[str] | None = None,
    datasets: str | Sequence[str] | None = None,
    n: int | None = None,
    max_new_tokens: int | None = None,
    *,
    preset: str | None = None,
    config: RunConfig | Path | str | Mapping[str, Any] | None = None,
    **overrides: Any,
) -> RunResult:
    """Evaluate ``models`` on ``datasets`` and return the finished run.

    ``models``: ``BACKEND:ID`` specs (``hf:smollm2-135m`` is the embedded model, ``mock:x`` a
    deterministic offline backend); ``datasets``: ``"builtin"``, a dataset name, a data file,
    or a list of them; ``n``: prompts per dataset; ``max_new_tokens``: the answer length cap;
    ``config``: a YAML file, a mapping of its keys, or a ``RunConfig``; ``overrides``: any
    top-level config key (``seed=1``, ``runs_dir="runs"``, ``generation={"temperature":
    0.7}``). Calling it again with the same arguments resumes: finished stages are reused.
    """
    if isinstance(config, RunConfig):
        given = [models, datasets, n, max_new_tokens, preset, *overrides.values()]
        if any(value is not None for value in given):
            raise ConfigError("sago.run: give a RunConfig alone, or keyword settings without one")
        chosen = config
    else:
        chosen = configure(
            models, datasets, n, max_new_tokens, preset=preset, config=config, **overrides
        )
    folder = evaluate(chosen)
    return RunResult(folder) if is_sweep(chosen) else load(folder)  # a sweep has no summary


def resume(run_dir: Path | str) -> RunResult:
    """Continue a failed or killed run (a folder or its store URL) from its saved
    configuration: every finished stage and shard is a cache hit, so only what the failure
    left unfinished is computed."""
    from sago.result import run_folder

    config = saved_config(run_folder(run_dir))
    folder = evaluate(config)
    return RunResult(folder) if is_sweep(config) else load(folder)


def saved_config(run_dir: Path) -> RunConfig:
    """The configuration a run (or a sweep) saved in its folder, validated as it was."""
    from pydantic import ValidationError

    saved = RunLayout(run_dir).run_config
    if not saved.is_file():
        raise InputError(f"has no {saved.name} (not a sago run folder)", file=str(run_dir))
    try:
        config = RunConfig.model_validate(json.loads(saved.read_text(encoding="utf-8")))
    except (ValueError, ValidationError) as exc:
        raise InputError(f"is not a valid run configuration: {exc}", file=str(saved)) from exc
    if config.runs_store is not None:
        return config  # the store is the run's home; run_dir is this machine's mirror of it
    # A folder that was moved or copied continues where it is now, not where it was written.
    here: dict[str, Any] = {"runs_dir": run_dir.resolve().parent}
    if not is_sweep(config):
        here["run_id"] = run_dir.resolve().name
    return config.model_copy(update=here)


def dry_run(config: RunConfig, say: Callable[[str], object] = print) -> None:
    """The plan of ``config``: inputs are validated as for a run, nothing is loaded or sent
    (a temperature sweep: each arm's plan, in rising temperature)."""
    if is_sweep(config):
        arms = sweep_arms(config)
        say(f"Temperature sweep {sweep_id(config, arms)}: {len(arms)} runs, one per arm")
        for arm in arms:
            say(f"\nArm T {arm.temperature:g} (K {arm.samples}):")
            dry_run(arm.config, say)
        return
    from sago_core.backends.hub_check import uncached_warning
    from sago_core.run_plan import render_plan

    plan = plan_of(config)
    if plan.api and config.api.key_env and not os.environ.get(config.api.key_env):
        plan.warnings.append(f"api.key_env {config.api.key_env!r} is not set: a real run stops")
    uncached = (uncached_warning(model_id) for model_id in hub_models(config))
    plan.warnings.extend(line for line in uncached if line)
    say(render_plan(plan, config))


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


def evaluate(config: RunConfig) -> Path:
    """Preflight, then the evaluation flow (a temperature sweep: every arm, then the sweep's
    page and card); returns the run's (or the sweep's) folder."""
    from sago_core.backends.hub_check import require_bertscore_encoder
    from sago_core.run_start import start_line

    require_bertscore_encoder(config.bertscore.model)  # named, with how to point at a copy
    if is_sweep(config):
        return sweep(config)
    with stoppable(config) as stopper:
        preflight(config)
        print(start_line(plan_of(config), config), flush=True)  # before anything starts
        configure_environment(config)
        stopper.server = temporary_server()
        return evaluate_run(config)


@contextlib.contextmanager
def stoppable(config: RunConfig) -> Iterator[Stopper]:
    """SIGTERM or SIGINT stops the run within seconds: its flow run marked Crashed, its
    workers then its temporary server stopped, one line saying how to resume it, exit 130
    (SIGINT) or 143 (SIGTERM); a second signal exits at once (``flows.runtime.stopping``)."""
    from sago.flows.runtime.stopping import stop_on_signals

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
    from sago.flows.runtime.server_outage import api_url

    if api_url() is not None:
        return None
    from sago.flows.runtime.temporary_server import own_temporary_server

    return own_temporary_server()


def evaluate_run(config: RunConfig) -> Path:
    """One run through the evaluation flow (a Prefect outage leaves it resumable)."""
    from sago.flows.evaluate import evaluate, layout_of
    from sago.flows.runtime.server_outage import resumable_outage

    with resumable_outage(layout_of(config).run_dir):
        return Path(evaluate(config))


def sweep(config: RunConfig) -> Path:
    """A temperature sweep, after the preflight its arms share (models, data and store;
    only decoding differs): ``run_sweep`` through the evaluation flow; its folder."""
    with stoppable(config) as stopper:
        preflight(sweep_arms(config)[0].config)
        configure_environment(config)
        stopper.server = temporary_server()
        paths = run_sweep(config, evaluate_run)
    return paths[0].parent


def run_sweep(config: RunConfig, evaluate_arm: Callable[[RunConfig], Path]) -> list[Path]:
    """Every arm as the plain run it is (``sago_core/sweep.py``; an arm whose run exists is
    a cache hit, stage by stage), in rising temperature, then the sweep's page and card in
    its own folder; returns their paths. The sweep's configuration is saved there first, so
    ``sago resume`` on the sweep folder continues the sweep."""
    from sago_core.artifacts.store import write_json
    from sago_core.report.sweep.card import write_sweep_card
    from sago_core.report.sweep.page import ArmRun, write_sweep

    arms = sweep_arms(config)
    folder = RunLayout.of(config.runs_dir, sweep_id(config, arms))
    write_json(sweep_record(config), folder.run_config)
    finished = []
    for arm in arms:
        print(f"Arm T {arm.temperature:g} (K {arm.samples}): run {arm.run_id}")
        run_dir = evaluate_arm(arm.config)
        finished.append(ArmRun(arm.temperature, arm.samples, arm.run_id, run_dir))
        print(f"Artifacts: {run_dir}")
    data, page = write_sweep(folder.run_dir, finished)
    cards = write_sweep_card(folder.run_dir)
    print(f"Sweep: {page} ({data.name}); card: {', '.join(str(p) for p in cards)}")
    return [data, page, *cards]
