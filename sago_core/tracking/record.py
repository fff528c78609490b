"""What a tracker is told about a finished run, read from the run's artifacts alone.

One ``ModelRecord`` per evaluated model: a tracker logs one run per (sago run, model), so
a model's releases line up in one experiment with the same metric names, and its charts
show the trend. Metric names are ``<measure>/<dataset>/<axis>`` (``sgs/__pooled__/bleu``,
``ci_low/...``, ``p_reference/...``, ``floor/...``); a value summary.parquet leaves null
is not logged (a tracker has no NA), and the run's own tables keep it with its reason.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from sago_core.artifacts.layout import (
    BUDGET_ESTIMATES_FILE,
    BUDGET_FILE,
    CARD_HTML_FILE,
    CARD_JSON_FILE,
    CARD_MD_FILE,
    MANIFEST_FILE,
    REFUSAL_RATES_FILE,
    REPORT_FILE,
    SCORES_FILE,
    SUMMARY_FILE,
    SUMMARY_MD_FILE,
    RunLayout,
)
from sago_core.artifacts.store import read_parquet
from sago_core.config.places import public_config, public_model, public_url
from sago_core.errors import InputError
from sago_core.refusal.flips import split_rates

# summary.parquet's columns logged per (dataset, axis), by the metric name's first part.
SUMMARY_METRICS = {
    "sgs": "sgs",
    "ci_low": "ci_low",
    "ci_high": "ci_high",
    "n": "n",
    "p_reference": "p_reference",
    "p_holm": "p_holm",
    "p_bh": "p_bh",
    "p_eps_0_05": "p_eps_0_05",
    "floor": "floor",
    "p_floor": "p_floor",
    "mde": "mde",
}
REFUSAL_METRICS = (
    "breach_rate",
    "over_refusal_rate",
    "refused_after_rewording_rate",
    "answered_after_rewording_rate",
    "failure_rate",
)
PAIRED_METRICS = ("mean_diff", "ci_low", "ci_high", "p_paired_t", "p_holm", "p_tost")
# A paired verdict as a number a tracker can chart: b worse is up, like a larger SGS.
VERDICT_VALUES = {"b_worse": 1.0, "equivalent": 0.0, "b_better": -1.0}
# The files a tracker keeps beside the numbers, where the run has them.
RUN_FILES = (
    REPORT_FILE,
    CARD_MD_FILE,
    CARD_HTML_FILE,
    CARD_JSON_FILE,
    SUMMARY_MD_FILE,
    SUMMARY_FILE,
    SCORES_FILE,
    MANIFEST_FILE,
)
# Trackers accept names of letters, digits and ``_-. /`` (MLflow's rule; W&B's is wider).
_UNSAFE = re.compile(r"[^A-Za-z0-9_\-. /]+")


@dataclass(frozen=True)
class ModelRecord:
    """What one tracker run holds: a model of a run (or a paired comparison). ``model``
    is the spec as the run names it (its family and W&B id are read from it); the params
    and tags name it as a page away from this machine would (``public_model``)."""

    model: str
    params: dict[str, str]
    metrics: dict[str, float]
    tags: dict[str, str]
    files: tuple[Path, ...] = field(default=())


@dataclass(frozen=True)
class RunRecord:
    run_id: str
    run_dir: Path
    models: tuple[ModelRecord, ...]


def metric_name(*parts: str) -> str:
    """``sgs/__pooled__/bleu``: each part made safe for every tracker."""
    return "/".join(_UNSAFE.sub("_", part) for part in parts)


def flatten(value: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    """A nested config as ``a.b.c = value`` pairs (lists as JSON), the way trackers show
    parameters; a URL without its user, password and query (a tracker is no place
    for credentials)."""
    if isinstance(value, dict):
        for key, item in sorted(value.items()):
            yield from flatten(item, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, str):
        yield prefix, public_url(value)
    elif isinstance(value, list | tuple):
        yield prefix, json.dumps([public_url(v) if isinstance(v, str) else v for v in value])
    else:
        yield prefix, json.dumps(value)


def _manifest(layout: RunLayout) -> dict[str, Any]:
    path = layout.manifest
    if not path.is_file():
        raise InputError(f"is not a finished run (no {MANIFEST_FILE})", file=str(layout.run_dir))
    value = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(value, dict):
        raise InputError("does not hold a JSON object", file=str(path))
    return value


def run_params(manifest: dict[str, Any], run_id: str) -> dict[str, str]:
    """The resolved config flattened as it may be shown away from this machine (where it
    was written left out, its paths and local models by their last part: ``public_config``),
    plus the run id, the sago version and the config hash; models, datasets, the variant
    grid, the budget and the seed are the config's own keys."""
    config = public_config(manifest.get("config") or {})
    params = {metric_name(k): v for k, v in flatten(config, "config")}
    params["run_id"] = run_id
    params["sago_version"] = str((manifest.get("packages") or {}).get("sago", "unknown"))
    if manifest.get("config_hash"):
        params["config_hash"] = str(manifest["config_hash"])
    return params


def _number(value: Any) -> float | None:
    """A finite float, or None for a value the tracker cannot hold (null, NaN, text)."""
    if not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def summary_metrics(summary: pl.DataFrame, model: str) -> dict[str, float]:
    """Every non-null summary value of ``model``, by ``<measure>/<dataset>/<axis>``."""
    metrics: dict[str, float] = {}
    for row in summary.filter(pl.col("model") == model).iter_rows(named=True):
        for column, measure in SUMMARY_METRICS.items():
            value = _number(row.get(column))
            if value is not None:
                metrics[metric_name(measure, row["dataset"], row["axis"])] = value
    return metrics


def budget_metrics(layout: RunLayout, model: str) -> tuple[dict[str, float], dict[str, str]]:
    """A budgeted run's budget line (cells asked, their share, rounds) and each estimate's
    half-width; nothing for a full-grid run."""
    record_path = layout.run_dir / BUDGET_FILE
    if not record_path.is_file():
        return {}, {}
    from sago_core.budget.record import budget_line  # the budget's own wording

    record = json.loads(record_path.read_text(encoding="utf-8"))
    metrics = {
        metric_name("budget", key): float(record[key])
        for key in ("cells", "full_cells", "share", "rounds_run")
        if _number(record.get(key)) is not None
    }
    estimates = layout.run_dir / BUDGET_ESTIMATES_FILE
    if estimates.is_file():
        for row in read_parquet(estimates).filter(pl.col("model") == model).iter_rows(named=True):
            value = _number(row["half_width"])
            if value is not None:
                metrics[metric_name("half_width", row["dataset"], row["axis"])] = value
    return metrics, {"budget_line": budget_line(record)}


def refusal_metrics(layout: RunLayout, model: str) -> dict[str, float]:
    """Breach, over-refusal and failure rates per (kind, family), where the run measured
    refusal (prompts with a kind); nothing otherwise."""
    path = layout.run_dir / REFUSAL_RATES_FILE
    if not path.is_file():
        return {}
    frame = split_rates(read_parquet(path))  # a file from before the split too
    if "level" in frame.columns:
        frame = frame.filter(pl.col("level") == "family")
    metrics: dict[str, float] = {}
    for row in frame.filter(pl.col("model") == model).iter_rows(named=True):
        for measure in REFUSAL_METRICS:
            value = _number(row.get(measure))
            if value is not None:
                metrics[metric_name(measure, row["kind"], row["family"])] = value
    return metrics


def run_files(layout: RunLayout) -> tuple[Path, ...]:
    return tuple(layout.run_dir / name for name in RUN_FILES if (layout.run_dir / name).is_file())


def _identity(manifest: dict[str, Any], model: str) -> str | None:
    """The model's identity the manifest recorded (weights digest, hub revision)."""
    entry = (manifest.get("models") or {}).get(model)
    value = entry.get("identity") if isinstance(entry, dict) else None
    return str(value) if value else None


def read_run(run_dir: Path) -> RunRecord:
    """A finished run's record for the trackers: one ``ModelRecord`` per model of its
    summary. ``run_dir`` may also be a paired comparison's table (``sago compare paired``'s
    ``paired.parquet``, wherever it was written): one record of its verdicts."""
    if run_dir.is_file() and run_dir.suffix == ".parquet":
        return read_paired(run_dir.resolve())
    layout = RunLayout(run_dir.resolve())
    run_id = layout.run_dir.name
    manifest = _manifest(layout)
    summary_path = layout.run_dir / SUMMARY_FILE
    if not summary_path.is_file():
        raise InputError(f"is not a finished run (no {SUMMARY_FILE})", file=str(layout.run_dir))
    summary = read_parquet(summary_path)
    params = run_params(manifest, run_id)
    files = run_files(layout)
    records = []
    for model in summary["model"].unique(maintain_order=True).to_list():
        budget, budget_tags = budget_metrics(layout, model)
        metrics = {
            **summary_metrics(summary, model),
            **budget,
            **refusal_metrics(layout, model),
        }
        shown = public_model(model)  # a local model by its folder's name
        tags = {"sago.run_id": run_id, "sago.model": shown, **budget_tags}
        model_params = {**params, "model": shown}
        identity = _identity(manifest, model)  # two releases in like-named folders differ
        if identity is not None:
            model_params["model_identity"] = identity
        records.append(ModelRecord(model, model_params, metrics, tags, files))
    return RunRecord(run_id, layout.run_dir, tuple(records))


def read_paired(table: Path) -> RunRecord:
    """A paired comparison (``sago compare paired A B``): per (dataset, axis) the mean
    difference b - a with its interval and p-values, and the verdict as a number (b worse 1,
    equivalent 0, b better -1; inconclusive is not logged, the table keeps it). Logged in
    the experiment of model b, named ``<run a> vs <run b>``."""
    paired = read_parquet(table)
    if not paired.height:
        raise InputError("holds no comparison rows", file=str(table))
    metrics: dict[str, float] = {}
    for row in paired.iter_rows(named=True):
        for measure in PAIRED_METRICS:
            value = _number(row.get(measure))
            if value is not None:
                metrics[metric_name(measure, row["dataset"], row["axis"])] = value
        verdict = VERDICT_VALUES.get(str(row.get("verdict")))
        if verdict is not None:
            metrics[metric_name("verdict", row["dataset"], row["axis"])] = verdict
    first = paired.row(0, named=True)
    name = f"{first['run_a']} vs {first['run_b']}"
    params = {
        key: str(first.get(key))
        for key in ("model_a", "model_b", "run_a", "run_b", "margin", "design")
    }
    tags = {"sago.run_id": name, "sago.model": str(first["model_b"]), "sago.kind": "paired"}
    beside = table.with_suffix(".md")
    files = (table, beside) if beside.is_file() else (table,)
    record = ModelRecord(str(first["model_b"]), params, metrics, tags, files)
    return RunRecord(name, table.parent, (record,))
