"""The words for the tails' flip columns (``flip_right_to_wrong``, ``flip_wrong_to_right`` of
tails.parquet), one owner for the report's tail table, its headline and the card.

At K = 1 a flip column is the share of judged variants whose answer flipped. At K > 1
samples per prompt text it is the mean over judged variants of the flip beyond the base's
own self-flip rate (statistics/tails.py, sampling/flips.py), which can be negative: a
different number, so every label says which. A run is sampled when its instances carry
``stages/instances.SAMPLED_COLUMNS``.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from sago_core.artifacts.layout import INSTANCES_FILE
from sago_core.stages.instances import SAMPLED_COLUMNS

SHARES = ("flip right→wrong", "flip wrong→right")
BEYOND = (
    "flip right→wrong beyond the base's self-flip (mean)",
    "flip wrong→right beyond the base's self-flip (mean)",
)
AT_K = (
    "at K > 1 samples the flip columns are the mean over judged variants of the flip beyond "
    "the base's own self-flip rate (what resampling the base alone flips), not a share of "
    "variants; they can be negative"
)


def sampled(instances: pl.DataFrame | None) -> bool:
    """Whether ``instances`` (instances.parquet) are of a run at K > 1 samples."""
    return instances is not None and set(SAMPLED_COLUMNS) <= set(instances.columns)


def sampled_run(run_dir: Path) -> bool:
    """The same for a run folder (its instances.parquet's schema alone is read)."""
    path = run_dir / INSTANCES_FILE
    return path.is_file() and set(SAMPLED_COLUMNS) <= set(pl.read_parquet_schema(path))


def flip_headers(at_k: bool) -> list[str]:
    """The two flip columns' headers."""
    return list(BEYOND if at_k else SHARES)
