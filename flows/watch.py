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
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact

from flows.evaluate import evaluate
from flows.runtime.object_store import runs_folder
from flows.runtime.server_outage import best_effort
from sago_core.config import build_config
from sago_core.site.address import site_address
from sago_core.site.build import build_site
from sago_core.site.collect import run_names
from sago_core.site.paths import SITE_DIR
from sago_core.watch.leaderboard import write_leaderboard
from sago_core.watch.registry import Registry, discover_models
from sago_core.watch.releases import identity_of, previous_release, write_release_card


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
) -> list[str]:
    """Evaluate every watched model not evaluated before; returns the specs evaluated now."""
    logger = get_run_logger()
    registry = Registry(runs_folder(runs_dir))  # a store URL: this machine's mirror of it
    evaluated = []
    for spec in discover_models(source):
        identity = identity_of(spec)
        if registry.done(spec, identity) or not registry.claim(spec, identity):
            continue
        try:
            values = {**(overrides or {}), "models": [spec], "runs_dir": runs_dir}
            run_dir = evaluate(build_config(preset, values, source=f"watch of {source}"))
        except BaseException:
            registry.release(spec, identity)  # the next watch run tries again
            raise
        previous = previous_release(registry.entries(), spec, identity)
        registry.record(spec, identity, Path(run_dir))
        write_release_card(Path(run_dir), spec, previous)
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
