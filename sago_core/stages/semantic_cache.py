"""BERTScore F1 cached across runs: one raw F1 per (scorer, candidate text, reference text),
below the runs folder (``.cache/semantic/``).

Two stages ask it. The semantic filter scores every filtered-family candidate against its
base prompt before any model answers: the score depends on the two texts and the scorer
only, never on the evaluated model, so every later run of the same prompts (the next
release, a budgeted run after a full one, a resumed run in a fresh folder) reads the scores
instead of encoding them again. Pair scoring scores each variant's answer against its base
answer: a budgeted run's next round, or a full run after a budgeted one, scores only the
pairs no stage scored before (the baseline rescaling is applied after, to the raw F1).
The scorer's identity is its resolved name, its layer and, for a local folder, a digest of
its ``config.json`` and its files' sizes (so replaced weights are a different scorer).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from sago_core.artifacts.json_cache import JsonCache
from sago_core.artifacts.layout import CacheLayout
from sago_core.backends.model_source import resolve_bertscore_model
from sago_core.stages.variants import F1Fn

CACHE_VERSION = "semantic-f1-v1"


def scorer_identity(resolved: str, num_layers: int) -> str:
    """Who scores: the resolved model (a folder or a hub id) and its layer, with a digest
    of a local folder's config and file sizes."""
    parts = [CACHE_VERSION, resolved, f"layers={num_layers}"]
    folder = Path(resolved)
    if folder.is_dir():
        digest = hashlib.sha256()
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            digest.update(f"{path.relative_to(folder)}:{path.stat().st_size}".encode())
            if path.name == "config.json":
                digest.update(path.read_bytes())
        parts.append(digest.hexdigest())
    return "|".join(parts)


def cached_f1(f1: F1Fn, cache: JsonCache, identity: str) -> F1Fn:
    """``f1`` asked only for the pairs the cache does not hold; every score it gives is
    stored. The scores come back in the order asked, cached or not."""

    def scored(candidates: Sequence[str], references: Sequence[str]) -> list[float]:
        keys = [JsonCache.key(identity, c, r) for c, r in zip(candidates, references, strict=True)]
        found: list[float | None] = []
        for key in keys:
            entry = cache.get(key)
            found.append(float(entry["f1"]) if isinstance(entry, dict) and "f1" in entry else None)
        missing = [i for i, value in enumerate(found) if value is None]
        if missing:
            new = f1([candidates[i] for i in missing], [references[i] for i in missing])
            for i, value in zip(missing, new, strict=True):
                cache.put(keys[i], {"f1": float(value)})
                found[i] = float(value)
        return [float(v) for v in found if v is not None]

    return scored


def cached_scorer(f1: F1Fn, cache_dir: str | None, model: str, num_layers: int) -> F1Fn:
    """``f1`` (the configured scorer's raw F1: ``bertscore.model``, ``num_layers``) through
    the shared F1 cache below the cache root ``cache_dir``; ``f1`` itself without one."""
    if cache_dir is None:
        return f1
    identity = scorer_identity(resolve_bertscore_model(model), num_layers)
    return cached_f1(f1, JsonCache(CacheLayout(Path(cache_dir)).semantic), identity)
