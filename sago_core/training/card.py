"""The dataset card beside a training export (``README.md``): YAML front matter the Hub's
``json`` builder reads (one config per kind, its file as the ``train`` split) and a body that
says where the examples come from (run, model, sago version), how the split was drawn, which
filters removed how many instances, and the examples per family and per dataset."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl
import yaml

from sago_core.artifacts.layout import MANIFEST
from sago_core.training.split import SPLIT_FILE, Split

CARD_FILE = "README.md"
FORMATS = {
    "sft": "prompt-completion (conversational): `prompt`, `completion`",
    "dpo": "preference with explicit prompt (conversational): `prompt`, `chosen`, `rejected`",
    "consistency": "prompt-completion (conversational) plus `base_prompt` and the ids "
    "`dataset`, `prompt_id`, `variant_id`, `family`",
}


def data_file(kind: str) -> str:
    return f"{kind}.jsonl"


def _manifest(run_dir: Path) -> dict[str, Any]:
    path = run_dir / MANIFEST
    if not path.exists():
        return {}
    value = json.loads(path.read_text(encoding="utf-8"))
    return value if isinstance(value, dict) else {}


def front_matter(kinds: list[str]) -> dict[str, Any]:
    return {
        "configs": [
            {"config_name": kind, "data_files": [{"split": "train", "path": data_file(kind)}]}
            for kind in kinds
        ],
        "tags": ["sago", "prompt-stability", "consistency-training", "trl"],
        "task_categories": ["text-generation"],
    }


def _counts(sources: Mapping[str, pl.DataFrame], column: str) -> list[str]:
    kinds = list(sources)
    lines = [f"| {column} | " + " | ".join(kinds) + " |", "|---" * (len(kinds) + 1) + "|"]
    values = sorted({v for frame in sources.values() for v in frame[column].to_list()})
    for value in values:
        cells = [str(sources[k].filter(pl.col(column) == value).height) for k in kinds]
        lines.append(f"| {value} | " + " | ".join(cells) + " |")
    return lines


def training_card(
    *,
    run_dir: Path,
    model: str,
    split: Split,
    thresholds: Mapping[str, float],
    dropped: Mapping[str, int],
    n_no_references: int,
    sources: Mapping[str, pl.DataFrame],
) -> str:
    """The card; ``sources``: each kind's instances behind its examples, in kind order."""
    run_id = run_dir.name
    version = (_manifest(run_dir).get("packages") or {}).get("sago", "unknown")
    kinds = list(sources)
    head = yaml.safe_dump(front_matter(kinds), sort_keys=False)
    lines = [
        "---",
        head.rstrip(),
        "---",
        f"# sago training data: {run_id}",
        "",
        f"Consistency-training examples from the sago run `{run_id}` of model "
        f"`{model}` (sago {version}): a prompt rewritten without changing what it "
        "asks should get the answer the original prompt got.",
        "",
        "## Files (TRL dataset formats, JSON Lines)",
        "",
        *[f"- `{data_file(k)}`: {sources[k].height} examples, {FORMATS[k]}" for k in kinds],
        f"- `{SPLIT_FILE}`: the split, fixed before training",
        "",
        "## Split",
        "",
        f"- seed {split.spec.seed}; held out: {split.spec.prompt_share} of each dataset's "
        "prompts (ranked by a seeded hash of the prompt id)",
        f"- families trained: {', '.join(split.trained_families)}; held out: "
        f"{', '.join(split.held_out_families)}",
        f"- datasets trained: {', '.join(split.trained_datasets)}; held out: "
        f"{', '.join(split.held_out_datasets)}",
        *[
            f"- prompts of `{d}`: {len(split.train_prompts[d])} train, "
            f"{len(split.held_out_prompts[d])} held out"
            for d in sorted(split.train_prompts)
        ],
        "",
        "## Filters (instances removed, in order)",
        "",
        "- divergence: an instance is kept when any axis reaches its threshold on "
        "|normalised delta|: " + ", ".join(f"{a} >= {t}" for a, t in thresholds.items()),
        "- a base answer judged wrong against the prompt's references is not a target; "
        f"kept without a verdict (no references): {n_no_references}",
        *[f"- {reason}: {n}" for reason, n in dropped.items()],
        "",
        "## Examples per family",
        "",
        *_counts(sources, "family"),
        "",
        "## Examples per dataset",
        "",
        *_counts(sources, "dataset"),
        "",
    ]
    return "\n".join(lines)
