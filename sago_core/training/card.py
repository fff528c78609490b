"""The dataset card beside a training export (``README.md``): YAML front matter the Hub's
``json`` builder reads (one config per kind, its file as the ``train`` split) and a body that
says where the examples come from (run, model, sago version), how the split was drawn, which
filters removed how many instances, and the examples per family and per dataset."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
import yaml

from sago_core.artifacts.layout import MANIFEST
from sago_core.training.split import SPLIT_FILE

if TYPE_CHECKING:
    from sago_core.training.export import TrainingExport

CARD_FILE = "README.md"
FORMATS = {
    "sft": "prompt-completion (conversational): `prompt`, `completion`",
    "dpo": "preference with explicit prompt (conversational): `prompt`, `chosen`, `rejected`",
    "pairs": "prompt-completion (conversational) plus `base_prompt` and the ids "
    "`dataset`, `prompt_id`, `variant_id`, `family`",
}


def _manifest(run_dir: Path) -> dict[str, Any]:
    path = run_dir / MANIFEST
    if not path.exists():
        return {}
    value = json.loads(path.read_text(encoding="utf-8"))
    return value if isinstance(value, dict) else {}


def front_matter(kinds: list[str]) -> dict[str, Any]:
    from sago_core.training.export import data_file

    return {
        "configs": [
            {"config_name": kind, "data_files": [{"split": "train", "path": data_file(kind)}]}
            for kind in kinds
        ],
        "tags": ["sago", "prompt-stability", "consistency-training", "trl"],
        "task_categories": ["text-generation"],
    }


def _counts(selected: TrainingExport, column: str) -> list[str]:
    from sago_core.training.export import DPO

    kinds = list(selected.rows)
    lines = [f"| {column} | " + " | ".join(kinds) + " |", "|---" * (len(kinds) + 1) + "|"]
    values = sorted(selected.kept[column].unique().to_list())
    for value in values:
        cells = []
        for kind in kinds:
            if kind == DPO:
                n = sum(1 for r in _dpo_ids(selected) if r[column] == value)
            else:
                n = selected.kept.filter(pl.col(column) == value).height
            cells.append(str(n))
        lines.append(f"| {value} | " + " | ".join(cells) + " |")
    return lines


def _dpo_ids(selected: TrainingExport) -> list[dict[str, Any]]:
    from sago_core.training.export import same_answer

    return [r for r in selected.kept.iter_rows(named=True) if not same_answer(r)]


def training_card(selected: TrainingExport, run_dir: Path) -> str:
    from sago_core.training.export import data_file

    manifest = _manifest(run_dir)
    version = (manifest.get("packages") or {}).get("sago", "unknown")
    split = selected.split
    kinds = list(selected.rows)
    head = yaml.safe_dump(front_matter(kinds), sort_keys=False)
    lines = [
        "---",
        head.rstrip(),
        "---",
        f"# sago training data: {selected.run_id}",
        "",
        f"Consistency-training examples from the sago run `{selected.run_id}` of model "
        f"`{selected.model}` (sago {version}): a prompt rewritten without changing what it "
        "asks should get the answer the original prompt got.",
        "",
        "## Files (TRL dataset formats, JSON Lines)",
        "",
        *[f"- `{data_file(k)}`: {len(selected.rows[k])} examples, {FORMATS[k]}" for k in kinds],
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
        "|normalised delta|: "
        + ", ".join(f"{a} >= {t}" for a, t in selected.filters.thresholds.items()),
        "- a base answer judged wrong against the prompt's references is not a target; "
        f"kept without a verdict (no references): {selected.n_no_references}",
        *[f"- {reason}: {n}" for reason, n in selected.dropped.items()],
        "",
        "## Examples per family",
        "",
        *_counts(selected, "family"),
        "",
        "## Examples per dataset",
        "",
        *_counts(selected, "dataset"),
        "",
    ]
    return "\n".join(lines)
