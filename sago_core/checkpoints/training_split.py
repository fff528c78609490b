"""The ID training split a fine-tuning series learns from, kept apart from every evaluation set.

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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sago_core.data.prompt import Prompt
from sago_core.data.sampling import sample_prompts
from sago_core.errors import ConfigError
from sago_core.statistics.correctness import normalise_answer

BUILTIN_TRAINING = "builtin_train"
SPLIT_FILE = "training_split.json"  # inside every fine-tuned checkpoint folder
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
    path = folder / SPLIT_FILE
    if not path.is_file():
        return None
    return TrainingSplit.from_json(json.loads(path.read_text(encoding="utf-8")))
