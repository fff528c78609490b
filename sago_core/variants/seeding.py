"""Per-variant randomness: a variant's text depends on its identity, never on call order."""

from __future__ import annotations

import hashlib
import random


def variant_seed(run_seed: int, dataset: str, prompt_id: str, variant_id: str) -> int:
    key = f"{run_seed}\x1f{dataset}\x1f{prompt_id}\x1f{variant_id}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "big") >> 1


def variant_rng(seed: int) -> random.Random:
    """Python's Mersenne Twister: identical sequences on every platform for a given seed."""
    return random.Random(seed)
