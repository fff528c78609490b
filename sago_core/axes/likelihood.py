"""The teacher-forced axes: the base answer's log-probability (Prob) and mean token entropy
(Ent) under the variant prompt minus under the base prompt (stages/analysis.py measures them;
backends that cannot teacher-force leave them null with their reason)."""

from __future__ import annotations

import polars as pl


def teacher_forced_reason() -> pl.Expr:
    """Why a teacher-forced measurement (Act, Prob, Ent) is null on a row of the delta join:
    the variant's own reason, its base's, or the backend's silence."""
    return pl.coalesce(
        pl.col("missing_reason"), pl.col("reason_base"), pl.lit("not measured by the backend")
    )


def prob_delta_rule() -> tuple[pl.Expr, pl.Expr]:
    return pl.col("logprob") - pl.col("logprob_base"), teacher_forced_reason()


def ent_delta_rule() -> tuple[pl.Expr, pl.Expr]:
    return pl.col("mean_entropy") - pl.col("ent_base"), teacher_forced_reason()
