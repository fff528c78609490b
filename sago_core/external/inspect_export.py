"""``sago export <run> --format inspect --out FOLDER``: a run's instances as inspect_ai eval
logs, one per (model, dataset), so ``inspect view --log-dir FOLDER`` browses them and
``inspect_ai.log.read_eval_log`` reads them.

Written as inspect_ai's JSON log layout (``EvalLog`` version 2, the layout
``inspect_log.py`` reads back) without importing inspect_ai, so the export needs no extra;
docs/guide/trackers-and-viewers.md ("The inspect viewer") says what each sample holds. A
delta the run could not measure is the score ``"NA"`` with the reason as its explanation
(inspect's scores have no null); a missing SGS is left out of the metrics, its reason kept.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from sago_core.artifacts.layout import SUMMARY_FILE, model_slug
from sago_core.artifacts.store import write_text
from sago_core.config.places import public_model
from sago_core.external.hf_dataset import empty_folder, instances_frame, run_manifest
from sago_core.vocabulary import AXES, VARIANT_COLUMNS

INSPECT = "inspect"  # the export format's name
LOG_VERSION = 2  # inspect_ai's EvalLog.version
MISSING = "NA"
SUMMARY_METRICS = ("sgs", "ci_low", "ci_high", "n")
META_COLUMNS = (
    "prompt_id",
    "variant_id",
    *VARIANT_COLUMNS,
    "base_prompt",
    "base_answer",
    "base_correct",
    "variant_correct",
    "correct_missing_reason",
)


def _score(row: dict[str, Any], axis: str) -> dict[str, Any]:
    value = row.get(f"d_{axis}")
    if value is None:
        reason = row.get(f"reason_{axis}") or "not measured"
        return {"value": MISSING, "explanation": str(reason)}
    return {"value": float(value)}


def sample(row: dict[str, Any], axes: tuple[str, ...]) -> dict[str, Any]:
    """One instance as an inspect ``EvalSample``."""
    answer = row.get("variant_answer") or ""
    prompt = row.get("variant_prompt") or ""
    return {
        "id": f"{row['prompt_id']}/{row['variant_id']}",
        "epoch": 1,
        "input": prompt,
        "target": row.get("base_answer") or "",
        "messages": [
            {"role": "user", "content": prompt, "source": "input"},
            {"role": "assistant", "content": answer, "source": "generate"},
        ],
        "output": {
            "model": row["model"],
            "choices": [{"message": {"role": "assistant", "content": answer}}],
            "completion": answer,
        },
        "scores": {axis: _score(row, axis) for axis in axes},
        "metadata": {name: row.get(name) for name in META_COLUMNS},
    }


def eval_scores(summary: pl.DataFrame, axes: tuple[str, ...]) -> list[dict[str, Any]]:
    """Per axis the SGS, its interval and n as inspect ``EvalScore`` metrics."""
    by_axis = {r["axis"]: r for r in summary.iter_rows(named=True)}
    scores = []
    for axis in axes:
        row = by_axis.get(axis, {})
        metrics = {
            name: {"name": name, "value": float(row[name])}
            for name in SUMMARY_METRICS
            if row.get(name) is not None
        }
        reason = row.get("missing_reason") if row else "no summary row"
        scores.append(
            {
                "name": axis,
                "scorer": axis,
                "metrics": metrics,
                **({"metadata": {"missing_reason": reason}} if reason else {}),
            }
        )
    return scores


def eval_log(
    instances: pl.DataFrame,
    summary: pl.DataFrame,
    model: str,
    dataset: str,
    run_id: str,
    manifest: dict[str, Any],
) -> dict[str, Any]:
    """The inspect ``EvalLog`` of one (model, dataset)."""
    axes = tuple(AXES)
    created = str(manifest.get("started_at") or datetime.now(UTC).isoformat())
    finished = str(manifest.get("written_at") or created)
    samples = [sample(row, axes) for row in instances.iter_rows(named=True)]
    version = str((manifest.get("packages") or {}).get("sago", "unknown"))
    eval_id = f"{run_id}-{model_slug(model)}-{dataset}"
    return {
        "version": LOG_VERSION,
        "status": "success",
        "eval": {
            "eval_id": eval_id,
            "run_id": run_id,
            "created": created,
            "task": f"sago/{dataset}",
            "task_id": eval_id,
            "dataset": {"name": dataset, "samples": len(samples)},
            "model": model,
            "config": {},
            "packages": {"sago": version},
            "metadata": {"sago_run_id": run_id, "config_hash": manifest.get("config_hash")},
        },
        "plan": {"name": "sago", "steps": []},
        "results": {
            "total_samples": len(samples),
            "completed_samples": len(samples),
            "scores": eval_scores(summary, axes),
        },
        "stats": {"started_at": created, "completed_at": finished},
        "samples": samples,
    }


def _log_name(created: str, model: str, dataset: str) -> str:
    """inspect's own naming: ``<time>_<task>_<id>.json`` (time with ``-`` for ``:``)."""
    stamp = created.replace(":", "-").split(".")[0]
    return f"{stamp}_sago-{model_slug(dataset)}_{model_slug(model)}.json"


def export_inspect(run_dir: Path, out: Path) -> list[Path]:
    """One inspect eval log per (model, dataset) of the run in ``out`` (a new or empty
    folder); their paths."""
    empty_folder(out)
    instances, summary = instances_frame(run_dir), instances_frame(run_dir, SUMMARY_FILE)
    manifest = run_manifest(run_dir)
    # A local model by its folder's name, as the site shows it: no path of this machine.
    names = {m: public_model(m) for m in instances["model"].unique().to_list()}
    instances, summary = (
        frame.with_columns(pl.col("model").replace(names)) for frame in (instances, summary)
    )
    created = str(manifest.get("started_at") or datetime.now(UTC).isoformat())
    written = []
    keys = instances.select("model", "dataset").unique(maintain_order=True)
    for model, dataset in keys.iter_rows():
        rows = instances.filter((pl.col("model") == model) & (pl.col("dataset") == dataset))
        rows = rows.sort("prompt_id", "variant_id")
        scored = summary.filter((pl.col("model") == model) & (pl.col("dataset") == dataset))
        log = eval_log(rows, scored, model, dataset, run_dir.name, manifest)
        path = out / _log_name(created, model, dataset)
        written.append(write_text(json.dumps(log, ensure_ascii=False, indent=1), path))
    return written
