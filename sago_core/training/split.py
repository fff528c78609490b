"""The split a training export fixes before any training, stored beside the data.

A fix is judged by whether its gain transfers to what it never saw, so three things are
split at once: the prompts of each dataset (train / held out), the variant families
(trained / held out, e.g. train on register and noise, hold out structural, script and
language) and the datasets (trained / held out). Only (train prompt, trained family,
trained dataset) rows are written for training; every other cell is kept for the report.

Every draw is deterministic: a key's place is the rank of ``sha256(seed, kind, key)``, and
the held-out side takes ``round(share x n)`` keys (at least one, never all), so the same run,
seed and shares give the same split on any machine, whatever the row order. A split that
would leave a side empty is refused in one line: a claim of transfer needs both sides.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sago_core.errors import ConfigError, InputError

SPLIT_FILE = "split.json"
TRAIN = "train"
HELD_OUT = "held_out"
DEFAULT_SEED = 0
DEFAULT_PROMPT_SHARE = 0.3  # of each dataset's prompts, held out
DEFAULT_DATASET_SHARE = 0.3  # of the run's datasets, held out (when none are named)
DEFAULT_HELD_OUT_FAMILIES = ("structural", "script", "language")


@dataclass(frozen=True)
class SplitSpec:
    """What the user asks for. ``held_out_datasets`` None: drawn with ``dataset_share``."""

    seed: int = DEFAULT_SEED
    prompt_share: float = DEFAULT_PROMPT_SHARE
    dataset_share: float = DEFAULT_DATASET_SHARE
    held_out_families: tuple[str, ...] = DEFAULT_HELD_OUT_FAMILIES
    held_out_datasets: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        for name in ("prompt_share", "dataset_share"):
            value = getattr(self, name)
            if not 0.0 < value < 1.0:
                raise ConfigError(f"split {name} {value}: must lie strictly between 0 and 1")


@dataclass(frozen=True)
class Split:
    """The drawn split: each dataset's prompt ids on both sides, families, datasets."""

    spec: SplitSpec
    trained_families: tuple[str, ...]
    held_out_families: tuple[str, ...]
    trained_datasets: tuple[str, ...]
    held_out_datasets: tuple[str, ...]
    train_prompts: Mapping[str, tuple[str, ...]]  # dataset -> prompt ids
    held_out_prompts: Mapping[str, tuple[str, ...]]

    def side_of_prompt(self, dataset: str, prompt_id: str) -> str:
        return TRAIN if prompt_id in self.train_prompts.get(dataset, ()) else HELD_OUT

    def trains_on(self, dataset: str, prompt_id: str, family: str) -> bool:
        return (
            dataset in self.trained_datasets
            and family in self.trained_families
            and self.side_of_prompt(dataset, prompt_id) == TRAIN
        )

    def records(self) -> dict[str, Any]:
        return {
            "seed": self.spec.seed,
            "prompt_share": self.spec.prompt_share,
            "dataset_share": self.spec.dataset_share,
            "requested_held_out_families": list(self.spec.held_out_families),
            "requested_held_out_datasets": (
                None if self.spec.held_out_datasets is None else list(self.spec.held_out_datasets)
            ),
            "families": {
                TRAIN: list(self.trained_families),
                HELD_OUT: list(self.held_out_families),
            },
            "datasets": {
                TRAIN: list(self.trained_datasets),
                HELD_OUT: list(self.held_out_datasets),
            },
            "prompts": {
                dataset: {
                    TRAIN: list(self.train_prompts[dataset]),
                    HELD_OUT: list(self.held_out_prompts[dataset]),
                }
                for dataset in sorted(self.train_prompts)
            },
        }


def _rank(keys: Iterable[str], seed: int, kind: str) -> list[str]:
    def digest(key: str) -> str:
        return hashlib.sha256(f"{seed}\x1f{kind}\x1f{key}".encode()).hexdigest()

    return sorted(set(keys), key=lambda key: (digest(key), key))


def _held_out_count(n: int, share: float) -> int:
    return min(n - 1, max(1, round(share * n)))


def _datasets(datasets: Sequence[str], spec: SplitSpec) -> tuple[list[str], list[str]]:
    names = sorted(set(datasets))
    if spec.held_out_datasets is not None:
        unknown = [d for d in spec.held_out_datasets if d not in names]
        if unknown:
            raise ConfigError(
                f"held-out datasets {unknown} are not in the run (its datasets: {names})"
            )
        held = sorted(set(spec.held_out_datasets))
    else:
        if len(names) < 2:
            raise ConfigError(
                f"the run has {len(names)} dataset ({', '.join(names) or 'none'}): a dataset "
                "split needs at least 2, one trained and one held out"
            )
        count = _held_out_count(len(names), spec.dataset_share)
        held = sorted(_rank(names, spec.seed, "dataset")[:count])
    trained = [d for d in names if d not in held]
    if not held:
        raise ConfigError("the split leaves no held-out dataset: name at least one")
    if not trained:
        raise ConfigError(f"the split holds out every dataset ({held}): none is left to train on")
    return trained, held


def _families(families: Sequence[str], spec: SplitSpec) -> tuple[list[str], list[str]]:
    names = sorted(set(families))
    held = [f for f in names if f in spec.held_out_families]
    trained = [f for f in names if f not in held]
    if not held:
        raise ConfigError(
            f"the split leaves no held-out family: none of {list(spec.held_out_families)} is in "
            f"the run (its families: {names})"
        )
    if not trained:
        raise ConfigError(
            f"the split holds out every family of the run ({held}): none is left to train on"
        )
    return trained, held


def draw_split(keys: Sequence[tuple[str, str, str]], spec: SplitSpec) -> Split:
    """The split of a run's (dataset, prompt_id, family) rows under ``spec``."""
    if not keys:
        raise ConfigError("the run has no instances to split")
    trained_datasets, held_datasets = _datasets([k[0] for k in keys], spec)
    trained_families, held_families = _families([k[2] for k in keys], spec)
    train: dict[str, tuple[str, ...]] = {}
    held: dict[str, tuple[str, ...]] = {}
    for dataset in sorted({k[0] for k in keys}):
        ranked = _rank((k[1] for k in keys if k[0] == dataset), spec.seed, f"prompt:{dataset}")
        if len(ranked) < 2 and dataset in trained_datasets:
            raise ConfigError(
                f"dataset {dataset} has {len(ranked)} prompt: a prompt split needs at least 2, "
                "one to train on and one held out"
            )
        k = _held_out_count(len(ranked), spec.prompt_share) if len(ranked) > 1 else 1
        held[dataset] = tuple(sorted(ranked[:k]))
        train[dataset] = tuple(sorted(ranked[k:]))
    return Split(
        spec,
        tuple(trained_families),
        tuple(held_families),
        tuple(trained_datasets),
        tuple(held_datasets),
        train,
        held,
    )


def read_split(path: Path) -> Split:
    """A stored ``split.json`` back as a ``Split`` (for the report on the held-out cells)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        requested = data["requested_held_out_datasets"]
        spec = SplitSpec(
            int(data["seed"]),
            float(data["prompt_share"]),
            float(data["dataset_share"]),
            tuple(data["requested_held_out_families"]),
            None if requested is None else tuple(requested),
        )
        return Split(
            spec,
            tuple(data["families"][TRAIN]),
            tuple(data["families"][HELD_OUT]),
            tuple(data["datasets"][TRAIN]),
            tuple(data["datasets"][HELD_OUT]),
            {d: tuple(s[TRAIN]) for d, s in data["prompts"].items()},
            {d: tuple(s[HELD_OUT]) for d, s in data["prompts"].items()},
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"is not a sago training split ({exc!r})", file=str(path)) from exc
