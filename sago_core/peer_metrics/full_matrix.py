"""``posix`` of peer_metrics.parquet: the paper's psi over each instance's full matrix
(posix_matrix.parquet, stages/posix_matrix.py), averaged over instances.

A scope's family keeps the prompt texts of that family and the base (both the prompt x_i and
the answer's text j in it), the sub-matrix of the texts the other indices' family rows
compare; ``__all__`` keeps every text. ``coverage`` says how many instances the cap reduced
(an instance with ``n_prompts`` above the texts it kept, counted over all its families:
``with_kept`` before scoping), and at K > 1 that the answers are sample 0's, one per prompt
text. Polars and the standard library only.
"""

from __future__ import annotations

from collections import Counter

import polars as pl

from sago_core.peer_metrics.posix import posix_full_psi
from sago_core.statistics.tails import ALL_FAMILIES
from sago_core.vocabulary import BASE_FAMILY, POOLED

INSTANCE = ["model", "dataset", "prompt_id"]
NO_MATRIX = (
    "the full matrix was not computed (posix_matrix is off in the run's config); "
    "posix_base_column is its base column alone"
)
NO_PAIR = "no instance with two prompt texts whose answers were scored under each other"
AT_K = "at K > 1 the answers are sample 0's, one per prompt text"

Measured = tuple[float | None, int, str | None, str | None]  # value, n, reason, coverage


def scoped(matrix: pl.DataFrame, model: str, dataset: str, family: str) -> pl.DataFrame:
    """The rows of ``matrix`` in one peer-metrics scope (module docstring)."""
    rows = matrix.filter(pl.col("model") == model)
    if dataset != POOLED:
        rows = rows.filter(pl.col("dataset") == dataset)
    if family != ALL_FAMILIES:
        inside = [family, BASE_FAMILY]
        rows = rows.filter(
            pl.col("prompt_family").is_in(inside) & pl.col("answer_family").is_in(inside)
        )
    return rows


def instance_psi(rows: pl.DataFrame) -> float | None:
    """psi of one instance's rows (prompt_variant_id, answer_variant_id, logprob,
    n_response_tokens)."""
    texts = sorted(set(rows["prompt_variant_id"].to_list()) | set(rows["answer_variant_id"]))
    at = {v: k for k, v in enumerate(texts)}
    logprob: list[list[float | None]] = [[None] * len(texts) for _ in texts]
    tokens = [0] * len(texts)
    for x, y, lp, length in rows.select(
        "prompt_variant_id", "answer_variant_id", "logprob", "n_response_tokens"
    ).iter_rows():
        finite = lp is not None and lp == lp and abs(lp) != float("inf")
        logprob[at[x]][at[y]] = lp if finite else None
        tokens[at[y]] = max(tokens[at[y]], int(length or 0))
    return posix_full_psi(logprob, tokens)


def with_kept(matrix: pl.DataFrame) -> pl.DataFrame:
    """``matrix`` with ``n_kept``: the texts its instance kept under the cap, counted before
    a family's scope keeps some of them."""
    return matrix.with_columns(
        pl.col("prompt_variant_id").n_unique().over(INSTANCE).cast(pl.Int32).alias("n_kept")
    )


def _coverage(rows: pl.DataFrame, sampled: bool) -> str | None:
    if "n_kept" not in rows.columns:
        rows = with_kept(rows)
    sizes = rows.group_by(INSTANCE).agg(
        pl.col("n_kept").first().alias("kept"), pl.col("n_prompts").first()
    )
    capped = sizes.filter(pl.col("n_prompts") > pl.col("kept"))
    parts = []
    if capped.height:
        cap = int(capped["kept"].max())  # type: ignore[arg-type]
        parts.append(
            f"{capped.height} of {sizes.height} instances had more prompt texts than the cap "
            f"({cap}): a seeded uniform sample of {cap} texts, every ordered pair among them"
        )
    if sampled:
        parts.append(AT_K)
    return "; ".join(parts) or None


def posix_full(rows: pl.DataFrame | None, sampled: bool = False) -> Measured:
    """Mean psi over the instances of ``rows`` (one scope of posix_matrix.parquet)."""
    if rows is None:
        return None, 0, NO_MATRIX, None
    values: list[float] = []
    for instance in rows.partition_by(INSTANCE, maintain_order=True):
        psi = instance_psi(instance)
        if psi is not None:
            values.append(psi)
    if not values:
        reasons = Counter(r for r in rows["missing_reason"].to_list() if r is not None)
        reason = sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))[0][0] if reasons else None
        return None, 0, reason or NO_PAIR, None
    return sum(values) / len(values), len(values), None, _coverage(rows, sampled)
