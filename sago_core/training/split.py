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

The other split: the one a fine-tuning series of the consistency study learns from
(``TrainingSplit``), kept apart from every evaluation set, and stored as ``split.json`` in every
member's folder.

A series trained on the questions it is later evaluated on measures memorisation, not
generalisation. So a split is checked against the evaluation prompts twice over: by prompt
id and by normalised question text (``normalise_answer``: lower case, no punctuation, no
articles, single spaces). Any overlap is an error naming the rows on both sides.

- ``builtin_train``: the built-in study's own training split, 24 TriviaQA-style quiz
  questions written for training only (none of them is a built-in evaluation prompt).
- any other dataset name or file (``sago_core.data.loading``): with ``hold_out_evaluated``
  the split is drawn (seeded, ``sample_prompts``) from the rows no evaluation set holds, by id
  or text; without it, the rows are taken as they are and must already be disjoint.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sago_core.data.prompt import Prompt
from sago_core.data.sampling import sample_prompts
from sago_core.errors import ConfigError, InputError
from sago_core.statistics.correctness import normalise_answer

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


# The consistency study's series split.

BUILTIN_TRAINING = "builtin_train"
# What a fine-tuning series member wrote before the two splits shared one file name; still
# read, so series folders made earlier stay usable.
OLD_SERIES_SPLIT_FILE = "training_split.json"
MAX_LISTED = 8  # overlapping rows named in an error before "... and N more"

_BUILTIN_TRAINING: tuple[tuple[str, str, str], ...] = (
    ("t01", "Which planet is the largest moon Titan orbiting?", "Saturn"),
    ("t02", "What is the capital city of Canada?", "Ottawa"),
    ("t03", "Which metal is liquid at room temperature?", "Mercury"),
    ("t04", "Who painted the Mona Lisa?", "Leonardo da Vinci"),
    ("t05", "What is the smallest prime number?", "2"),
    ("t06", "Which gas do plants absorb from the air for photosynthesis?", "Carbon dioxide"),
    ("t07", "In which continent is the Sahara desert?", "Africa"),
    ("t08", "What is the largest ocean on Earth?", "Pacific Ocean"),
    ("t09", "Who wrote the play Romeo and Juliet?", "William Shakespeare"),
    ("t10", "Which animal is known as the King of the Jungle?", "Lion"),
    ("t11", "How many continents are there on Earth?", "7"),
    ("t12", "What is the currency of the United Kingdom?", "Pound sterling"),
    ("t13", "Which instrument has 88 keys?", "Piano"),
    ("t14", "What is the tallest mountain in the world?", "Mount Everest"),
    ("t15", "Which country gave the Statue of Liberty to the United States?", "France"),
    ("t16", "What is the main language spoken in Brazil?", "Portuguese"),
    ("t17", "Which organ pumps blood around the human body?", "Heart"),
    ("t18", "In which city is the Colosseum?", "Rome"),
    ("t19", "What is frozen water called?", "Ice"),
    ("t20", "Which bird is the symbol of peace?", "Dove"),
    ("t21", "Who developed the theory of relativity?", "Albert Einstein"),
    ("t22", "What colour do you get by mixing blue and yellow?", "Green"),
    ("t23", "Which is the closest star to the Earth?", "The Sun"),
    ("t24", "How many legs does a spider have?", "8"),
)


def builtin_training_prompts() -> list[Prompt]:
    return [
        Prompt(BUILTIN_TRAINING, f"builtin-train-{pid}", text, (answer,), source="builtin")
        for pid, text, answer in _BUILTIN_TRAINING
    ]


@dataclass(frozen=True)
class TrainingSplit:
    """What a fine-tuning series learned from: the split's name and its rows."""

    name: str
    prompts: tuple[Prompt, ...]

    def records(self) -> list[dict[str, Any]]:
        return [
            {
                "dataset": p.dataset,
                "prompt_id": p.prompt_id,
                "question": p.prompt,
                "answer": p.references[0] if p.references else None,
                "source": p.source,
            }
            for p in self.prompts
        ]

    def digest(self) -> str:
        payload = json.dumps(self.records(), sort_keys=True).encode()
        return hashlib.sha256(payload).hexdigest()

    def pairs(self) -> list[tuple[str, str]]:
        """(question, first reference): what the fine-tuning reads."""
        return [(p.prompt, p.references[0]) for p in self.prompts if p.references]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "digest": self.digest(), "rows": self.records()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TrainingSplit:
        prompts = tuple(
            Prompt(
                r["dataset"],
                r["prompt_id"],
                r["question"],
                (r["answer"],) if r.get("answer") is not None else (),
                r.get("source") or "",
            )
            for r in data["rows"]
        )
        return cls(data["name"], prompts)


def overlaps(training: Sequence[Prompt], evaluation: Sequence[Prompt]) -> list[str]:
    """One line per training row that an evaluation prompt shares by id or normalised text."""
    by_id = {p.prompt_id: p for p in evaluation}
    by_text = {normalise_answer(p.prompt): p for p in evaluation}
    lines = []
    for row, prompt in enumerate(training, 1):
        where = prompt.source or f"row {row}"
        same_id = by_id.get(prompt.prompt_id)
        same_text = by_text.get(normalise_answer(prompt.prompt))
        if same_id is not None:
            lines.append(
                f"training {where} ({prompt.prompt_id}) has the id of evaluation prompt "
                f"{same_id.dataset}/{same_id.prompt_id}"
            )
        elif same_text is not None:
            lines.append(
                f"training {where} ({prompt.prompt_id}) has the question text of evaluation "
                f"prompt {same_text.dataset}/{same_text.prompt_id} ({same_text.source})"
            )
    return lines


def check_disjoint(split: TrainingSplit, evaluation: Sequence[Prompt], where: str) -> None:
    """Raise naming the overlapping rows; ``where`` says whose split it is."""
    lines = overlaps(split.prompts, evaluation)
    if lines:
        shown = "; ".join(lines[:MAX_LISTED])
        more = f"; ... and {len(lines) - MAX_LISTED} more" if len(lines) > MAX_LISTED else ""
        raise ConfigError(
            f"{where}: the training split {split.name!r} overlaps the evaluation sets in "
            f"{len(lines)} rows: {shown}{more}. Train on rows no evaluation set holds."
        )


def held_out(
    candidates: Sequence[Prompt], evaluation: Sequence[Prompt], n: int, seed: int
) -> list[Prompt]:
    """Up to ``n`` candidates (seeded) that share neither id nor normalised text with any
    evaluation prompt."""
    ids = {p.prompt_id for p in evaluation}
    texts = {normalise_answer(p.prompt) for p in evaluation}
    free = [
        p
        for p in candidates
        if p.references and p.prompt_id not in ids and normalise_answer(p.prompt) not in texts
    ]
    return sample_prompts(free, n, seed)


def read_checkpoint_split(folder: Path) -> TrainingSplit | None:
    """The split a series member learned from (``split.json``, or the older file name)."""
    for name in (SPLIT_FILE, OLD_SERIES_SPLIT_FILE):
        path = folder / name
        if path.is_file():
            return TrainingSplit.from_json(json.loads(path.read_text(encoding="utf-8")))
    return None
