"""``sago export <run> --format hf-results --out FOLDER [--push REPO]``: a run's results in
the layout evaluation leaderboards read from the Hugging Face Hub (lighteval's, the Open LLM
Leaderboard's), plus the per-instance details, as a dataset repository.

docs/guide/trackers-and-viewers.md ("The Hub's results layout") gives the files and fields.
A value the run could not measure is never written as a number: ``missing`` names it with
its reason. The pooled SGS is the equal-weight mean over datasets, so its stderr is
sqrt(sum se_d^2) / D. ``push_results`` uploads with ``huggingface_hub`` and its own token.
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import yaml

from sago_core.artifacts.layout import (
    INSTANCES_FILE,
    SCORES_FILE,
    SUMMARY_FILE,
    model_slug,
)
from sago_core.artifacts.store import write_parquet, write_text
from sago_core.config.places import public_config, public_model
from sago_core.errors import ConfigError
from sago_core.external.hf_dataset import empty_folder, instances_frame, run_manifest
from sago_core.vocabulary import POOLED

SUITE = "sago"
ALL = "all"  # lighteval's and the leaderboard's name for the aggregate row
SPLIT = "latest"
CARD_FILE = "README.md"


def task_name(dataset: str) -> str:
    """``sago|<dataset>|0``: lighteval's ``suite|task|few-shot`` key (no shots in SAGO)."""
    return ALL if dataset == POOLED else f"{SUITE}|{dataset}|0"


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_")


def standard_errors(scores: pl.DataFrame, model: str) -> dict[tuple[str, str], float]:
    """Per (dataset, axis) the standard error of the mean per-prompt score; pooled, of the
    equal-weight mean over datasets. A cell with fewer than two prompts has none."""
    have = scores.filter((pl.col("model") == model) & pl.col("s").is_not_null())
    errors: dict[tuple[str, str], float] = {}
    for (dataset, axis), group in have.group_by("dataset", "axis", maintain_order=True):
        values = group["s"].to_numpy()
        if len(values) > 1:
            errors[(str(dataset), str(axis))] = float(
                np.std(values, ddof=1) / math.sqrt(len(values))
            )
    datasets = sorted({d for d in have["dataset"].unique().to_list()})
    for axis in have["axis"].unique().to_list():
        parts = [errors.get((d, axis)) for d in datasets]
        if parts and all(p is not None for p in parts):
            pooled = math.sqrt(sum(p * p for p in parts if p is not None)) / len(parts)
            errors[(POOLED, axis)] = pooled
    return errors


def results_json(
    summary: pl.DataFrame,
    scores: pl.DataFrame,
    model: str,
    manifest: dict[str, Any],
    run_id: str,
) -> dict[str, Any]:
    """The leaderboard results document of one model."""
    errors = standard_errors(scores, model)
    results: dict[str, dict[str, float]] = {}
    missing: dict[str, dict[str, str]] = {}
    for row in summary.filter(pl.col("model") == model).iter_rows(named=True):
        task, axis = task_name(row["dataset"]), row["axis"]
        entry = results.setdefault(task, {})
        if row["sgs"] is None:
            missing.setdefault(task, {})[f"sgs_{axis}"] = str(row["missing_reason"])
            continue
        entry[f"sgs_{axis}"] = float(row["sgs"])
        stderr = errors.get((row["dataset"], axis))
        if stderr is not None:
            entry[f"sgs_{axis}_stderr"] = stderr
        else:
            missing.setdefault(task, {})[f"sgs_{axis}_stderr"] = "fewer than two prompts scored"
        for bound in ("ci_low", "ci_high"):
            if row[bound] is not None:
                entry[f"sgs_{axis}_{bound}"] = float(row[bound])
    identity = (manifest.get("models") or {}).get(model)
    return {
        "config_general": {
            "model_name": model,
            "model_sha": identity.get("identity") if isinstance(identity, dict) else None,
            "sago_version": (manifest.get("packages") or {}).get("sago"),
            "run_id": run_id,
            "config_hash": manifest.get("config_hash"),
            "start_time": manifest.get("started_at"),
            "end_time": manifest.get("written_at"),
            "config": manifest.get("config"),
        },
        "results": results,
        "missing": missing,
        "versions": dict.fromkeys(results, 0),
        "config_tasks": {
            task: {"name": task, "suite": [SUITE], "metric": sorted(values)}
            for task, values in results.items()
        },
    }


def _stamp(manifest: dict[str, Any]) -> str:
    """lighteval's time stamp in file names: ISO time with ``-`` for ``:``."""
    started = str(manifest.get("started_at") or datetime.now(UTC).isoformat())
    return started.split("+")[0].replace(":", "-")


def card_text(configs: list[dict[str, Any]], run_id: str) -> str:
    head = yaml.safe_dump({"configs": configs, "tags": ["sago", "evaluation"]}, sort_keys=False)
    return (
        f"---\n{head}---\n\n# sago results: {run_id}\n\n"
        "`results/` holds one results file per model in the layout evaluation leaderboards "
        "read (lighteval's: `config_general`, `results` per task with each axis' SGS, its "
        "standard error and 95% interval); `details/` the per-variant instances behind them, "
        "one configuration per model and dataset.\n"
    )


def export_hub_results(run_dir: Path, out: Path) -> list[Path]:
    """Write the folder (new or empty); the files written."""
    empty_folder(out)
    summary, scores, instances = (
        instances_frame(run_dir, name) for name in (SUMMARY_FILE, SCORES_FILE, INSTANCES_FILE)
    )
    manifest = run_manifest(run_dir)
    # Published as the site shows a run: no place or path of this machine, local models
    # by their folder's name, no credentials in a URL.
    names = {m: public_model(m) for m in summary["model"].unique().to_list()}
    summary, scores, instances = (
        frame.with_columns(pl.col("model").replace(names)) for frame in (summary, scores, instances)
    )
    models = manifest.get("models") or {}
    manifest = {
        **manifest,
        "config": public_config(manifest.get("config") or {}),
        "models": {names.get(k, public_model(k)): v for k, v in models.items()},
    }
    run_id = str(manifest.get("run_id") or run_dir.name)
    stamp = _stamp(manifest)
    written: list[Path] = []
    configs: list[dict[str, Any]] = []
    for model in summary["model"].unique(maintain_order=True).to_list():
        folder = model_slug(model)
        document = results_json(summary, scores, model, manifest, run_id)
        target = out / "results" / folder / f"results_{stamp}.json"
        written.append(write_text(json.dumps(document, indent=2, ensure_ascii=False), target))
        rows = instances.filter(pl.col("model") == model)
        for dataset in rows["dataset"].unique(maintain_order=True).to_list():
            task = _safe(task_name(dataset))
            details = rows.filter(pl.col("dataset") == dataset)
            relative = f"details/{folder}/{stamp}/details_{task}_{stamp}.parquet"
            written.append(write_parquet(details, out / relative, dict(details.schema)))
            configs.append(
                {
                    "config_name": _safe(f"{folder}_{task}"),
                    "data_files": [{"split": SPLIT, "path": [relative]}],
                }
            )
    written.append(write_text(card_text(configs, run_id), out / CARD_FILE))
    return written


def push_results(folder: Path, repo_id: str, private: bool = True) -> str:
    """Upload an exported folder to the dataset repository ``repo_id`` (created if it does
    not exist); its URL. The token is huggingface_hub's own: ``HF_TOKEN`` or a login."""
    try:
        from huggingface_hub import HfApi
    except ImportError as exc:
        raise ConfigError("--push needs huggingface_hub: pip install 'sago[hub]'") from exc
    api = HfApi()
    api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
    api.upload_folder(
        folder_path=str(folder),
        repo_id=repo_id,
        repo_type="dataset",
        commit_message=f"sago results ({folder.name})",
    )
    return f"https://huggingface.co/datasets/{repo_id}"
