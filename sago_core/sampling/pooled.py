"""What the report says about a run at K > 1, from ``sampling_tests`` alone: the pooled
excess per axis with its one-sided t-test, and the replay calibration.

Pooled excess: per prompt, the mean excess over its variants (the replay left out, as from
the scores), then over prompts the one-sided one-sample t-test of E[excess] > 0 (is there any
prompt-induced excess?) and > eps = ``MAIN_EPSILON`` (as the summary tests s), prompts being
the independent units. Only for the axes whose excess has a direction (``ONE_SIDED``: more
distance, more mirroring); Prob and Ent are shifts of either sign, tested per pair by the
sign-flip test and through SGS.

Replay calibration (a check of the false-positive rate): the replay is the base prompt asked
again, a variant whose true excess is zero. Per model and text axis, the share of replay
rows whose permutation p is below ``ALPHA`` should be at most ALPHA plus its binomial 95%
margin, 1.96 sqrt(ALPHA (1 - ALPHA) / n), and the pooled replay excess (one row per prompt)
should not be significant.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl

from sago_core.sampling.axis_tests import SAMPLED_AXES, TEXT_AXES
from sago_core.scoring.significance import one_sided_t_test
from sago_core.vocabulary import MAIN_EPSILON, REPLAY_FAMILY, Z95

ALPHA = 0.05
ONE_SIDED = (*TEXT_AXES, "mr")
TWO_SIDED = "a shift of either sign: tested per pair (sign flips) and through SGS"


def binomial_margin(n: int, alpha: float = ALPHA) -> float:
    """Half-width of the normal 95% interval of a share alpha over n rows."""
    return Z95 * math.sqrt(alpha * (1 - alpha) / n)


def _share_below(p_values: pl.Series) -> tuple[int, float | None]:
    tested = p_values.drop_nulls().to_numpy().astype(np.float64)
    n = len(tested)
    return n, (float((tested < ALPHA).mean()) if n else None)


def excess_table(tests: pl.DataFrame) -> list[dict[str, Any]]:
    """Per (model, sampled axis), datasets pooled: prompts, mean excess, the t-test p-values
    and the share of variant rows with permutation p < ALPHA."""
    variants = tests.filter(pl.col("family") != REPLAY_FAMILY)
    rows = []
    for (model, axis), part in variants.group_by(["model", "axis"], maintain_order=True):
        per_prompt = (
            part.filter(pl.col("excess").is_not_null())
            .group_by("dataset", "prompt_id")
            .agg(pl.col("excess").mean())
        )
        values = per_prompt["excess"].to_numpy().astype(np.float64)
        n_tested, share = _share_below(part["p_value"])
        row: dict[str, Any] = {
            "model": model,
            "axis": axis,
            "n_prompts": len(values),
            "n_rows": part["excess"].drop_nulls().len(),
            "mean_excess": float(values.mean()) if len(values) else None,
            "n_tested": n_tested,
            "share_p_below": share,
            "p_zero": None,
            "p_eps": None,
            "missing_reason": None,
        }
        if axis in ONE_SIDED:
            row["p_zero"] = one_sided_t_test(values, 0.0).p_value
            row["p_eps"] = one_sided_t_test(values, MAIN_EPSILON).p_value
            if row["p_zero"] is None:
                row["missing_reason"] = f"{len(values)} prompt(s) with an excess: no t-test"
        else:
            row["missing_reason"] = TWO_SIDED
        rows.append(row)
    order = {axis: i for i, axis in enumerate(SAMPLED_AXES)}
    return sorted(rows, key=lambda r: (r["model"], order.get(r["axis"], len(order))))


def replay_calibration(tests: pl.DataFrame) -> list[dict[str, Any]]:
    """Per (model, text axis): replay rows tested, the share with p < ALPHA, its bound,
    whether it holds, and the pooled replay excess with its one-sided p."""
    replay = tests.filter((pl.col("family") == REPLAY_FAMILY) & pl.col("axis").is_in(TEXT_AXES))
    rows = []
    for (model, axis), part in replay.group_by(["model", "axis"], maintain_order=True):
        n, share = _share_below(part["p_value"])
        values = part["excess"].drop_nulls().to_numpy().astype(np.float64)
        bound = ALPHA + binomial_margin(n) if n else None
        rows.append(
            {
                "model": model,
                "axis": axis,
                "n_tested": n,
                "share_p_below": share,
                "bound": bound,
                "holds": None if share is None or bound is None else share <= bound,
                "mean_excess": float(values.mean()) if len(values) else None,
                "p_excess": one_sided_t_test(values, 0.0).p_value,
                "n_excess": len(values),
            }
        )
    return sorted(rows, key=lambda r: (r["model"], TEXT_AXES.index(r["axis"])))
