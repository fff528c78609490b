"""Seeded sampling that is identical across machines and independent of file order.

Each prompt gets the key sha256(seed, dataset, prompt_id); the N smallest keys are kept.
Shuffling the file, or adding rows, never changes which of the existing prompts are drawn
beyond the rows that now rank lower.
"""

from __future__ import annotations

import hashlib

from sago_core.data.prompt import Prompt


def _rank_key(seed: int, prompt: Prompt) -> str:
    return hashlib.sha256(f"{seed}\x1f{prompt.dataset}\x1f{prompt.prompt_id}".encode()).hexdigest()


def sample_prompts(prompts: list[Prompt], n: int, seed: int) -> list[Prompt]:
    """Up to ``n`` prompts per dataset, returned sorted by (dataset, prompt_id)."""
    by_dataset: dict[str, list[Prompt]] = {}
    for prompt in prompts:
        by_dataset.setdefault(prompt.dataset, []).append(prompt)
    chosen: list[Prompt] = []
    for dataset in sorted(by_dataset):
        ranked = sorted(by_dataset[dataset], key=lambda p: _rank_key(seed, p))
        chosen.extend(sorted(ranked[:n], key=lambda p: p.prompt_id))
    return chosen
