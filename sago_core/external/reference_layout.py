"""The SAGO reference code's names and what each means in sago: its result folders
(``run_<model>_<dataset>_<family>_<YYYYMMDD>_<HHMMSS>/full_results_all_models.csv``, or
``results/<family>/run_multi_<dataset>_<stamp>/`` for open models), its family and dataset
slugs and display labels (``Punct.``, ``TriviaQA``), each family's baseline and the mood
family's strength labels, so the published files need no ``--family``.

A row at its family's baseline (strength 0; 1.0 for ``length_variation``, a length multiplier
of one) is the base asked again, never a variant. The mood family's labels
(``interrogative``, ``imperative``) name the mood asked for; sago's mood strength is how much
the mood changed (1: a question made a command or the reverse; 0: the mood kept).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

RESULTS_FILE = "full_results_all_models.csv"
# the reference's folder slugs, in the order its run script lists them
FAMILY_SLUGS: dict[str, tuple[str, str]] = {
    "spacing": ("noise", "spacing"),
    "punctuation": ("noise", "punctuation"),
    "letter_case": ("noise", "capitalization"),
    "politeness": ("register", "politeness"),
    "length_variation": ("structural", "length"),
    "inter_vs_imper": ("structural", "mood"),
}
# its aggregated CSVs' labels, and sago's own subtype names (a folder named for them)
FAMILY_NAMES: dict[str, tuple[str, str]] = {
    **FAMILY_SLUGS,
    "polite.": ("register", "politeness"),
    "punct.": ("noise", "punctuation"),
    "casing": ("noise", "capitalization"),
    "length": ("structural", "length"),
    "form": ("structural", "mood"),
    "register": ("register", "politeness"),
    "capitalization": ("noise", "capitalization"),
    "mood": ("structural", "mood"),
}
DATASET_LABELS = {
    "TruthfulQA": "truthful_qa",
    "Natural Questions": "natural_questions",
    "Alpaca": "alpaca",
    "SimpleQA Verified": "simpleqa_verified",
    "TriviaQA": "trivia_qa",
    "HotpotQA": "hotpot_qa",
}
DATASET_SLUGS = tuple(DATASET_LABELS.values())
# sago subtype -> its baseline strength (else 0); the mood family has none (labels only)
BASELINES: dict[str, float | None] = {"length": 1.0, "mood": None}
MOOD_LABELS = {"interrogative": True, "imperative": False}  # label -> asks for a question
_STAMP = r"(?P<stamp>\d{8}_\d{6})"
_CLOSED = re.compile(rf"^run_(?P<head>.+)_(?P<family>{'|'.join(FAMILY_SLUGS)})_{_STAMP}$")
_OPEN = re.compile(rf"^run_multi_(?P<dataset>.+)_{_STAMP}$")
_BARE = re.compile(rf"^run_{_STAMP}$")


@dataclass(frozen=True)
class RunName:
    """What a run folder's name (and, in the open-model layout, its parent's) says."""

    family_slug: str | None  # None: the name does not say
    dataset: str | None
    stamp: str  # YYYYMMDD_HHMMSS: orders runs of one triple


def family_of(name: str | None) -> tuple[str, str] | None:
    """(family, subtype) of a reference slug or label, or of sago's own subtype name."""
    return FAMILY_NAMES.get(name.strip().lower()) if name else None


def dataset_of(name: str | None) -> str | None:
    """The dataset slug of a reference label (``TriviaQA``), else the name as given."""
    if name is None or not name.strip():
        return None
    return DATASET_LABELS.get(name.strip(), name.strip())


def _dataset_in(head: str) -> str | None:
    for slug in sorted(DATASET_SLUGS, key=len, reverse=True):
        if head.endswith(f"_{slug}"):
            return slug
    return None


def parse_run_folder(name: str, parent: str | None = None) -> RunName | None:
    """The run folder's family, dataset and stamp, or None for a name in neither layout.
    ``parent``: the folder above it (the family, in the open-model layout)."""
    if match := _CLOSED.match(name):
        return RunName(match["family"], _dataset_in(match["head"]), match["stamp"])
    parent_family = parent.lower() if parent and family_of(parent) else None
    if match := _OPEN.match(name):
        return RunName(parent_family, match["dataset"], match["stamp"])
    if match := _BARE.match(name):
        return RunName(parent_family, None, match["stamp"])
    return None


def baseline_of(subtype: str) -> float | None:
    """The strength at which a family's row is the base asked again (None: no such row)."""
    return BASELINES.get(subtype, 0.0)
