"""Scheduled re-evaluation of new releases (`sago-watch`), and the evaluation entry point
the deployments use (`sago-evaluate-models`: models, datasets, preset).

A watch run lists the watched models, skips every (spec, identity) already in the registry,
claims each new one (exactly one of several overlapping watch runs wins it), evaluates it,
records it, and rebuilds the leaderboard: ``leaderboard.parquet`` (pooled SGS per model and
axis) and ``leaderboard.html`` (one report across all evaluated models).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
from prefect import flow, get_run_logger

from flows.evaluate import evaluate
from sago_core.artifacts.store import write_parquet, write_text
from sago_core.backends.model_source import LOCAL_BACKENDS, parse_model_spec, resolve_local_model
from sago_core.config import build_config
from sago_core.report.compare import compare_runs
from sago_core.vocabulary import POOLED
from sago_core.watch.registry import Registry, discover_models

LEADERBOARD = {
    "model": pl.String,
    "identity": pl.String,
    "axis": pl.String,
    "sgs": pl.Float64,
    "p_reference": pl.Float64,
    "run_dir": pl.String,
    "evaluated_at": pl.Float64,
}


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


def identity_of(spec: str) -> str:
    parsed = parse_model_spec(spec)
    local = parsed.backend in LOCAL_BACKENDS
    return resolve_local_model(parsed.model_id).identity if local else spec


def write_leaderboard(registry: Registry) -> tuple[Path, Path | None]:
    rows = []
    entries = registry.entries()
    for entry in entries:
        summary = Path(entry.run_dir) / "summary.parquet"
        if not summary.exists():
            continue
        pooled = pl.read_parquet(summary).filter(
            (pl.col("dataset") == POOLED) & (pl.col("model") == entry.spec)
        )
        for r in pooled.iter_rows(named=True):
            rows.append(
                {
                    "model": entry.spec,
                    "identity": entry.identity,
                    "axis": r["axis"],
                    "sgs": r["sgs"],
                    "p_reference": r.get("p_reference", r["p_eps_0_05"]),
                    "run_dir": entry.run_dir,
                    "evaluated_at": entry.evaluated_at,
                }
            )
    table = write_parquet(
        pl.DataFrame(rows, schema=LEADERBOARD), registry.root / "leaderboard.parquet", LEADERBOARD
    )
    runs = sorted(
        {Path(e.run_dir) for e in entries if (Path(e.run_dir) / "manifest.json").exists()}
    )
    page = write_text(compare_runs(runs), registry.root / "leaderboard.html") if runs else None
    return table, page


@flow(name="sago-watch", flow_run_name="watch", log_prints=True)
def watch(
    source: str,
    runs_dir: str = "runs",
    preset: str = "demo",
    overrides: dict[str, Any] | None = None,
) -> list[str]:
    """Evaluate every watched model not evaluated before; returns the specs evaluated now."""
    logger = get_run_logger()
    registry = Registry(Path(runs_dir))
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
        registry.record(spec, identity, Path(run_dir))
        evaluated.append(spec)
        logger.info("evaluated new model %s -> %s", spec, run_dir)
    registry.write_table()
    write_leaderboard(registry)
    return evaluated
