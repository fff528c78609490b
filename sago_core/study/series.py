"""The study's checkpoint series: built when missing, and proven apart from the evaluation.

``training_split`` draws the ID training split (``sago_core.training.split``);
``ensure_series`` builds the fine-tuning and quantisation series of a ``make_series`` block where
a checkpoint folder is missing or was made with other settings; ``check_training_splits``
reads the split every fine-tuned checkpoint of every series recorded and refuses any overlap
with the evaluation prompts. A checkpoint sago fine-tuned without a recorded split is
refused too (it cannot be checked); checkpoints from elsewhere (hub models, quantised
series) have no split and are listed as such.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sago_core.checkpoints.series import finetune_series, quantize_series, read_note
from sago_core.data.loading import load_prompts
from sago_core.data.prompt import Prompt
from sago_core.errors import ConfigError
from sago_core.study.config import FINETUNE, SeriesSettings, StudyConfig
from sago_core.training.split import (
    BUILTIN_TRAINING,
    TrainingSplit,
    builtin_training_prompts,
    check_disjoint,
    held_out,
    read_checkpoint_split,
)


def training_candidates(dataset: str, data_dir: Path | None) -> list[Prompt]:
    if dataset == BUILTIN_TRAINING:
        return builtin_training_prompts()
    return load_prompts((dataset,), data_dir, 10**9, 0)


def training_split(
    series: SeriesSettings, evaluation: Sequence[Prompt], data_dir: Path | None
) -> TrainingSplit:
    settings = series.training
    candidates = training_candidates(settings.dataset, data_dir)
    if settings.hold_out_evaluated:
        rows = held_out(candidates, evaluation, settings.n, settings.seed)
    else:
        rows = sorted(candidates, key=lambda p: p.prompt_id)[: settings.n]
    if not rows:
        raise ConfigError(
            f"make_series.training: dataset {settings.dataset!r} has no row with a reference "
            "answer that no evaluation set holds"
        )
    split = TrainingSplit(settings.dataset, tuple(rows))
    check_disjoint(split, evaluation, "make_series.training")
    return split


def _finetune_current(series: SeriesSettings, split: TrainingSplit) -> bool:
    for step in series.finetune_steps:
        note = read_note(series.finetune_folder(step))
        if note is None or (
            note.get("training_digest"),
            note.get("learning_rate"),
            note.get("batch_size"),
            note.get("base"),
        ) != (split.digest(), series.learning_rate, series.batch_size, series.base):
            return False
    return True


def ensure_series(series: SeriesSettings, split: TrainingSplit) -> dict[str, list[str]]:
    """Build what is missing; returns {"built": [...], "reused": [...]} folder names."""
    from sago_core.backends.model_source import resolve_local_model

    built: list[str] = []
    reused: list[str] = []
    source = None
    if series.finetune_steps:
        folders = [str(series.finetune_folder(s)) for s in series.finetune_steps]
        if _finetune_current(series, split):
            reused += folders
        else:
            source = resolve_local_model(series.base)
            finetune_series(
                source,
                split,
                series.finetune_steps,
                series.folder / FINETUNE,
                learning_rate=series.learning_rate,
                batch_size=series.batch_size,
                extra_note={"base": series.base},
            )
            built += folders
    missing = [
        b
        for b in series.quantize_bits
        if (read_note(series.quantize_folder(b)) or {}).get("base") != series.base
    ]
    reused += [str(series.quantize_folder(b)) for b in series.quantize_bits if b not in missing]
    if missing:
        source = source or resolve_local_model(series.base)
        quantize_series(
            source, missing, series.quantize_folder(missing[0]).parent, {"base": series.base}
        )
        built += [str(series.quantize_folder(b)) for b in missing]
    return {"built": built, "reused": reused}


def check_training_splits(
    config: StudyConfig, evaluation: Sequence[Prompt]
) -> list[dict[str, Any]]:
    """One row per checkpoint: its series, model and the split it was trained on (or none)."""
    rows = []
    for name, position, model in config.checkpoints():
        folder = Path(model.removeprefix("hf:"))
        note = read_note(folder) if model.startswith("hf:") and folder.is_dir() else None
        split = read_checkpoint_split(folder) if note else None
        if note and note.get("family") == FINETUNE and split is None:
            raise ConfigError(
                f"series.{name}[{position}]: {model} was fine-tuned without a recorded "
                "training split, so its disjointness from the evaluation sets cannot be "
                "checked; rebuild it (sago series finetune, or make_series)"
            )
        if split is not None:
            check_disjoint(split, evaluation, f"series.{name}[{position}] ({model})")
        rows.append(
            {
                "series": name,
                "position": position,
                "model": model,
                "training_split": split.name if split else None,
                "training_digest": split.digest() if split else None,
                "training_rows": len(split.prompts) if split else 0,
            }
        )
    return rows


def check_datasets(config: StudyConfig, present: set[str]) -> None:
    for field, name in [("in_distribution", config.in_distribution)] + [
        ("out_of_distribution", d) for d in config.out_of_distribution
    ]:
        if name not in present:
            raise ConfigError(
                f"{field}: dataset {name!r} is not among the evaluated prompts "
                f"({', '.join(sorted(present))})"
            )


def study_split_record(config: StudyConfig) -> dict[str, Any]:
    """Build the series where missing, check every recorded split against the evaluation
    prompts, and return what the study's ``training_split.json`` records."""
    from sago_core.data.loading import load_run_prompts

    evaluation = load_run_prompts(config.evaluation)
    check_datasets(config, {p.dataset for p in evaluation})
    split = None
    if config.make_series is not None:
        split = training_split(config.make_series, evaluation, config.evaluation.data_dir)
        done = ensure_series(config.make_series, split)
        for folder in done["built"]:
            print(f"built checkpoint {folder}")
    checkpoints = check_training_splits(config, evaluation)
    return {
        "check": "training rows share neither prompt id nor normalised question text with "
        "any evaluation prompt",
        "evaluation_prompts": len(evaluation),
        "evaluation_datasets": sorted({p.dataset for p in evaluation}),
        "series_split": split.to_json() if split else None,
        "checkpoints": checkpoints,
    }
