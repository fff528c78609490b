"""Per-sample seeds: one seed for each answer sampled at T > 0.

A sample is drawn from a generator of its own, seeded from the run's sampling seed
(``generation.seed``) and what the sample answers: the model, the prompt (dataset and prompt
id), the variant and the sample's index. So a rerun reproduces every sample, and a sample
does not change when other rows join or leave its batch or when the run gains prompts or
variants. The seed is a SHA-256 digest of those values, never Python's ``hash()`` (salted
per process). It has 31 bits: every engine and provider takes a seed that small.
"""

from __future__ import annotations

import hashlib
import json

SEED_BITS = 31


def sample_seed(
    run_seed: int, model: str, dataset: str, prompt_id: str, variant_id: str, sample: int
) -> int:
    """The seed of sample ``sample`` (0-based) of ``model``'s answer to one prompt text."""
    payload = json.dumps([run_seed, model, dataset, prompt_id, variant_id, sample])
    digest = hashlib.sha256(payload.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") & ((1 << SEED_BITS) - 1)
