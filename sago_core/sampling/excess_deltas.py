"""A model's ``deltas.parquet`` at K > 1, built from the excesses of ``sampling_tests``, so
per-prompt scores, summary, report and every reader of deltas run unchanged on it: the
per-prompt score and SGS are computed from the excesses exactly as at K = 1 from the deltas.

Per axis, the delta and delta_norm a row gets (R: the axis' scale):

- ``bleu``, ``bert``: delta_norm = -E, delta = -E x R. At K = 1, E = D = 1 - similarity / R,
  so -E = similarity / R - 1 = today's normalised delta (``excess.py``), sign included;
- ``mr``: delta = delta_norm = the flagged-share difference (at K = 1 m_variant - m_base);
- ``prob``, ``ent``: delta = mean over base samples under the variant prompt minus under the
  base prompt (at K = 1 today's delta), delta_norm = delta / R;
- ``act`` (``KEPT_AXES``): the row of the K = 1 deltas (sample 0's analysis): the prompt's
  hidden states do not depend on sampling;
- any other registered axis (``lang``): NA with ``NO_RULE``: it has no excess rule yet, and a
  single sampled answer is not the number it stands for at T = 0.
"""

from __future__ import annotations

import polars as pl

from sago_core.artifacts.schemas import DELTAS, conform
from sago_core.registry.axes import axes_for
from sago_core.sampling.axis_tests import SAMPLED_AXES, TEXT_AXES
from sago_core.vocabulary import NON_FINITE, ROW_KEY, VARIANT_COLUMNS

KEPT_AXES = ("act",)
NO_RULE = "no excess rule at K > 1 for this axis: not measured from sampled answers"


def _sampled(tests: pl.DataFrame) -> pl.DataFrame:
    scale = pl.col("axis").replace_strict(
        {a.name: a.scale for a in axes_for(tests["family"].unique().to_list())},
        return_dtype=pl.Float64,
    )
    text = pl.col("axis").is_in(list(TEXT_AXES))
    mirroring = pl.col("axis") == "mr"
    delta = (
        pl.when(text)
        .then(-pl.col("excess") * scale)
        .when(mirroring)
        .then(pl.col("excess"))
        .otherwise(pl.col("mean_variant") - pl.col("mean_base"))
    )
    norm = pl.when(text).then(-pl.col("excess")).otherwise(pl.col("delta") / scale)
    finite = pl.col("delta").is_finite()
    return (
        tests.with_columns(delta.alias("delta"))
        .with_columns(norm.alias("delta_norm"))
        .with_columns(
            pl.when(finite).then(pl.col("delta")).alias("delta"),
            pl.when(finite).then(pl.col("delta_norm")).alias("delta_norm"),
            pl.when(pl.col("delta").is_not_null() & ~finite)
            .then(pl.lit(NON_FINITE))
            .otherwise(pl.col("missing_reason"))
            .alias("missing_reason"),
        )
    )


def excess_deltas(tests: pl.DataFrame, deltas: pl.DataFrame) -> pl.DataFrame:
    """``tests``: sampling_tests of one model (or several); ``deltas``: the same models'
    deltas of sample 0 (the K = 1 computation), read only for ``KEPT_AXES``. One row per
    (variant, registered axis of the run), in deltas' order."""
    if tests.is_empty():
        return conform(deltas.filter(pl.col("axis").is_in(list(KEPT_AXES))), DELTAS)
    variants = tests.select([*ROW_KEY, *VARIANT_COLUMNS]).unique(maintain_order=True)
    present = variants["family"].unique().to_list()
    frames = []
    sampled = _sampled(tests)
    for axis in axes_for(present):
        if axis.name in SAMPLED_AXES:
            frames.append(sampled.filter(pl.col("axis") == axis.name))
        elif axis.name in KEPT_AXES:
            kept = deltas.filter(pl.col("axis") == axis.name).select(
                *ROW_KEY, "axis", "delta", "delta_norm", "missing_reason"
            )
            frames.append(
                variants.join(kept, on=ROW_KEY, how="left").with_columns(
                    pl.lit(axis.name).alias("axis"),
                    pl.coalesce(
                        pl.col("missing_reason"),
                        pl.when(pl.col("delta").is_null()).then(
                            pl.lit("no K = 1 delta for this row")
                        ),
                    ).alias("missing_reason"),
                )
            )
        else:
            frames.append(
                variants.with_columns(
                    pl.lit(axis.name).alias("axis"),
                    pl.lit(None, pl.Float64).alias("delta"),
                    pl.lit(None, pl.Float64).alias("delta_norm"),
                    pl.lit(NO_RULE).alias("missing_reason"),
                )
            )
    columns = list(DELTAS)
    return conform(pl.concat([conform(f, DELTAS).select(columns) for f in frames]), DELTAS).sort(
        [*ROW_KEY, "axis"]
    )
