"""``sago export training RUN --kind KIND --out FOLDER``: training data from a finished run, in
TRL's own conversational dataset formats (JSON Lines, one example a line).

- ``sft``: TRL's *prompt-completion* type. The variant prompt with the base's answer as the
  completion (bias-augmented consistency training): ``{"prompt": [{"role": "user",
  "content": VARIANT}], "completion": [{"role": "assistant", "content": BASE_ANSWER}]}``.
- ``dpo``: TRL's *preference* type with an explicit prompt. The variant prompt, the base's
  answer chosen, the variant's own answer rejected: ``{"prompt": [user VARIANT], "chosen":
  [assistant BASE_ANSWER], "rejected": [assistant VARIANT_ANSWER]}``; only where the variant's
  answer differs from the base's (a preference between equal texts teaches nothing).
- ``consistency``: what ``sago train --objective consistency`` reads (the kind is named after
  that objective, as ``sft`` and ``dpo`` are; it was ``pairs``): the prompt-completion fields
  of ``sft`` plus ``base_prompt`` (the base question as a user message) and the ids
  (``dataset``, ``prompt_id``, ``variant_id``, ``family``).

Which instances become examples, in this order (each drop is counted on the card):
the split (``split.py``: only train prompts of trained datasets and trained families), a base
answer present, the base answer right where the prompt has references (a wrong base is not a
target; without references it is kept, the card says how many), and divergence: at least one
axis with ``|d_<axis>| >= threshold`` (a measured normalised delta, per-axis thresholds).
Source: ``instances.parquet``, the run's one-row-per-variant join of texts, deltas and verdicts.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from sago_core.artifacts.store import write_json, write_text
from sago_core.errors import ConfigError
from sago_core.external.hf_dataset import instances_frame
from sago_core.training.card import CARD_FILE, data_file, training_card
from sago_core.training.split import SPLIT_FILE, Split, SplitSpec, draw_split
from sago_core.vocabulary import AXES, MAIN_EPSILON

SFT, DPO, CONSISTENCY = "sft", "dpo", "consistency"
KINDS = (SFT, DPO, CONSISTENCY)
IDS = ("dataset", "prompt_id", "variant_id", "family")
# Why an instance is not an example, in the order the filters apply.
HELD_OUT_CELL = "held-out split cell (prompt, family or dataset)"
NO_BASE_ANSWER = "no base answer"
BASE_WRONG = "base answer wrong per the references"
NOT_DIVERGING = "no axis over its threshold"
SAME_ANSWER = "variant answer missing or equal to the base answer (dpo only)"


@dataclass(frozen=True)
class Filters:
    """Per-axis thresholds on ``|delta_norm|``: an instance diverges when any measured axis
    reaches its threshold. Default: every registered axis at the paper's epsilon."""

    thresholds: Mapping[str, float] = field(
        default_factory=lambda: dict.fromkeys(AXES, MAIN_EPSILON)
    )

    def __post_init__(self) -> None:
        unknown = [a for a in self.thresholds if a not in AXES]
        if unknown:
            raise ConfigError(f"threshold axis {unknown[0]!r} is not an axis ({', '.join(AXES)})")
        if not self.thresholds:
            raise ConfigError("give at least one axis threshold")
        for axis, value in self.thresholds.items():
            if not value >= 0.0:
                raise ConfigError(f"threshold {axis}={value}: must be a number >= 0")


@dataclass(frozen=True)
class TrainingExport:
    """What one export selected: the split, the kept instances and the drops."""

    run_id: str
    model: str
    split: Split
    filters: Filters
    kept: pl.DataFrame  # instances that pass every filter (before the dpo-only one)
    sources: Mapping[str, pl.DataFrame]  # kind -> the instances behind its examples
    dropped: Mapping[str, int]
    n_no_references: int  # kept instances whose base answer could not be judged
    rows: Mapping[str, list[dict[str, Any]]]  # kind -> examples


def _user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def _assistant(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


def examples(kind: str, kept: pl.DataFrame) -> list[dict[str, Any]]:
    """The ``kind``'s examples from filtered instances (sorted by ids)."""
    rows: list[dict[str, Any]] = []
    for r in kept.iter_rows(named=True):
        if kind == SFT:
            rows.append(
                {"prompt": _user(r["variant_prompt"]), "completion": _assistant(r["base_answer"])}
            )
        elif kind == DPO:
            if same_answer(r):
                continue
            rows.append(
                {
                    "prompt": _user(r["variant_prompt"]),
                    "chosen": _assistant(r["base_answer"]),
                    "rejected": _assistant(r["variant_answer"]),
                }
            )
        elif kind == CONSISTENCY:
            rows.append(
                {
                    "prompt": _user(r["variant_prompt"]),
                    "completion": _assistant(r["base_answer"]),
                    "base_prompt": _user(r["base_prompt"]),
                    **{k: r[k] for k in IDS},
                }
            )
        else:
            raise ConfigError(f"training kind {kind!r}: choose one of {', '.join(KINDS)}")
    return rows


def same_answer(row: Mapping[str, Any]) -> bool:
    variant = row["variant_answer"]
    return variant is None or not variant.strip() or variant.strip() == row["base_answer"].strip()


def _diverges(frame: pl.DataFrame, filters: Filters) -> pl.Expr:
    checks = [
        (pl.col(f"d_{axis}").abs() >= threshold).fill_null(False)
        for axis, threshold in filters.thresholds.items()
        if f"d_{axis}" in frame.columns
    ]
    if not checks:
        raise ConfigError(f"none of the threshold axes {list(filters.thresholds)} is in the run")
    return pl.any_horizontal(checks)


def _model_rows(frame: pl.DataFrame, model: str | None) -> tuple[str, pl.DataFrame]:
    models = sorted(frame["model"].drop_nulls().unique().to_list())
    if model is None:
        if len(models) != 1:
            raise ConfigError(
                f"the run has {len(models)} models ({models}): choose one with --model"
            )
        model = models[0]
    elif model not in models:
        raise ConfigError(f"--model {model}: not in the run (its models: {models})")
    return model, frame.filter(pl.col("model") == model)


def select_training(
    run_dir: Path,
    kinds: Sequence[str],
    spec: SplitSpec,
    filters: Filters,
    model: str | None = None,
) -> TrainingExport:
    """Split the run, filter its instances, build each kind's examples (nothing written)."""
    kinds = list(dict.fromkeys(kinds))
    bad = [k for k in kinds if k not in KINDS]
    if bad or not kinds:
        raise ConfigError(
            f"training kind {bad[0] if bad else None!r}: choose from {', '.join(KINDS)}"
        )
    model, frame = _model_rows(instances_frame(run_dir), model)
    frame = frame.sort("dataset", "prompt_id", "variant_id")
    split = draw_split(list(frame.select("dataset", "prompt_id", "family").iter_rows()), spec)
    keys = frame.select("dataset", "prompt_id", "family").iter_rows()
    in_train = [split.trains_on(d, p, f) for d, p, f in keys]
    steps: tuple[tuple[str, pl.Series | pl.Expr], ...] = (
        (HELD_OUT_CELL, pl.Series(in_train, dtype=pl.Boolean)),
        (NO_BASE_ANSWER, pl.col("base_answer").str.strip_chars().str.len_chars().fill_null(0) > 0),
        (BASE_WRONG, pl.col("base_correct").fill_null(True)),
        (NOT_DIVERGING, _diverges(frame, filters)),
    )
    flags = [f"_keep{i}" for i in range(len(steps))]
    kept = frame.with_columns(
        [keep.alias(flag) for flag, (_, keep) in zip(flags, steps, strict=True)]
    )
    dropped: Counter[str] = Counter()
    for flag, (reason, _) in zip(flags, steps, strict=True):
        before = kept.height
        kept = kept.filter(pl.col(flag))
        dropped[reason] = before - kept.height
    kept = kept.drop(flags)
    rows = {kind: examples(kind, kept) for kind in kinds}
    sources = {
        kind: kept.filter(
            pl.Series([not same_answer(r) for r in kept.iter_rows(named=True)], dtype=pl.Boolean)
        )
        if kind == DPO
        else kept
        for kind in kinds
    }
    if DPO in rows:
        dropped[SAME_ANSWER] = kept.height - len(rows[DPO])
    empty = [kind for kind in kinds if not rows[kind]]
    if empty:
        raise ConfigError(
            f"no {empty[0]} example is left after the filters ({_drops(dropped)}): lower the "
            "thresholds (--min-delta AXIS=VALUE) or change the split"
        )
    return TrainingExport(
        run_dir.name,
        model,
        split,
        filters,
        kept,
        sources,
        dict(dropped),
        kept.filter(pl.col("base_correct").is_null()).height,
        rows,
    )


def _drops(dropped: Mapping[str, int]) -> str:
    return "; ".join(f"{reason}: {n}" for reason, n in dropped.items())


def _jsonl(rows: Sequence[Mapping[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def export_training(
    run_dir: Path,
    out: Path,
    kinds: Sequence[str],
    spec: SplitSpec | None = None,
    filters: Filters | None = None,
    model: str | None = None,
) -> Path:
    """Write ``<kind>.jsonl`` for each kind, ``split.json`` and the card ``README.md``."""
    if out.suffix or (out.exists() and (not out.is_dir() or any(out.iterdir()))):
        raise ConfigError(f"--out {out}: export training writes a new or empty folder (no suffix)")
    selected = select_training(run_dir, kinds, spec or SplitSpec(), filters or Filters(), model)
    for kind, rows in selected.rows.items():
        write_text(_jsonl(rows), out / data_file(kind))
    write_json(selected.split.records(), out / SPLIT_FILE)
    card = training_card(
        run_dir=run_dir,
        model=selected.model,
        split=selected.split,
        thresholds=selected.filters.thresholds,
        dropped=selected.dropped,
        n_no_references=selected.n_no_references,
        sources=selected.sources,
    )
    write_text(card, out / CARD_FILE)
    return out
