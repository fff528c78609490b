"""Scheduled re-evaluation of new releases (`sago-watch`), and the evaluation entry point
the deployments use (`sago-evaluate-models`: models, datasets, preset).

A watch run lists the watched models, skips every (spec, identity) already in the registry,
claims each new one (exactly one of several overlapping watch runs wins it), evaluates it,
records it, writes its stability card against the last release of its family it evaluated
(``sago_core/watch/releases.py``), and rebuilds the leaderboard
(``sago_core/watch/leaderboard.py``): ``leaderboard.parquet`` and ``leaderboard.html``, which
links the cards and marks significant regressions. Then it rebuilds the results site in the
runs folder's ``site/`` (``sago_core/site``; on an object store, written to the store) and
links it from a Prefect artifact: the store's address, not a file:// path that only this
machine can open.

A watch whose config has a ``budget`` runs a family's first release on the full grid and
each later one budgeted, the newest full run of its family its control variate
(``budget.baseline``), climbing the ``escalation`` ladder (``sago_core/watch/escalation.py``:
default 0.5, then the full grid) while its verdict against the last release is undecided
on a watched axis; both releases run at each budget, and the row cache makes each step
pay only its new cells. Every step (budget, cells, verdicts, baseline) is logged and kept
in the release's registry entry.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact

from sago.flows.evaluate import evaluate
from sago.flows.runtime.object_store import runs_folder
from sago.flows.runtime.server_outage import best_effort
from sago_core.config import BudgetSettings, build_config
from sago_core.site.address import site_address
from sago_core.site.build import build_site
from sago_core.site.collect import run_names
from sago_core.site.paths import SITE_DIR
from sago_core.watch.escalation import escalate, parse_escalation, release_config
from sago_core.watch.leaderboard import write_leaderboard
from sago_core.watch.registry import Registry, discover_models
from sago_core.watch.releases import (
    baseline_run,
    identity_of,
    previous_release,
    same_weights,
    write_release_card,
)
from sago_core.watch.steps import Step


@flow(name="sago-evaluate-models", flow_run_name="evaluate-{preset}", log_prints=True)
def evaluate_models(
    models: list[str],
    datasets: list[str] | None = None,
    preset: str = "demo",
    overrides: dict[str, Any] | None = None,
) -> str:
    """The deployment's face of the `sago-evaluate` flow: plain parameters, one strict
    config."""
    values = dict(overrides or {})
    values["models"] = models
    if datasets:
        values["datasets"] = datasets
    return evaluate(build_config(preset, values, source="deployment parameters"))


@flow(name="sago-watch", flow_run_name="watch", log_prints=True)
def watch(
    source: str,
    runs_dir: str = "runs",
    preset: str = "demo",
    overrides: dict[str, Any] | None = None,
    escalation: dict[str, Any] | None = None,
) -> list[str]:
    """Evaluate every watched model not evaluated before; returns the specs evaluated now.
    ``escalation``: the budget ladder of a budgeted watch (``EscalationSettings``)."""
    logger = get_run_logger()
    ladder = parse_escalation(escalation)
    registry = Registry(runs_folder(runs_dir))  # a store URL: this machine's mirror of it

    def run_at(model: str, budget: BudgetSettings | None) -> Path:
        where = f"watch of {source}"
        return Path(evaluate(release_config(preset, overrides, runs_dir, model, budget, where)))

    budget = build_config(preset, {**(overrides or {}), "runs_dir": runs_dir}).budget
    evaluated = []
    for spec in discover_models(source):
        identity = identity_of(spec)
        if registry.done(spec, identity) or not registry.claim(spec, identity):
            continue
        previous = previous_release(registry.entries(), spec, identity)
        try:
            if budget is None:
                run_dir, steps = run_at(spec, None), list[Step]()
            else:
                rerun = previous is not None and same_weights(previous)
                design = release_config(preset, overrides, runs_dir, spec, budget, source)
                baseline = baseline_run(registry.entries(), spec, identity, design)
                run_dir, previous, steps = escalate(
                    spec, previous, budget, ladder, run_at, rerun, baseline
                )
        except BaseException:
            registry.release(spec, identity)  # the next watch run tries again
            raise
        for step in steps:
            logger.info("%s at %s", spec, step.describe())
        registry.record(spec, identity, run_dir, [s.record() for s in steps])
        write_release_card(run_dir, spec, previous)
        evaluated.append(spec)
        logger.info("evaluated new model %s -> %s", spec, run_dir)
    registry.write_table()
    write_leaderboard(registry)
    publish_site(registry.root)
    return evaluated


def publish_site(runs: Path) -> str | None:
    """Rebuild the results site over ``runs``; print and link where it can be opened (None:
    no run yet, no site)."""
    if not run_names(runs):
        return None
    address = site_address(build_site(runs, runs / SITE_DIR))
    print(f"Site: {address.best}")
    lines = [f"[the results site]({address.best})"]
    if address.store_url and address.store_url != address.best:
        lines.append(f"On the store: `{address.store_url}`")
    best_effort(
        create_markdown_artifact,
        "the site artifact",
        markdown="# SAGO results across releases\n\n" + "\n\n".join(lines),
        key="sago-site",
        description="The results site: each family's stability release after release",
    )
    return address.best
