"""Stage: teacher-forced scoring pass -> analysis.parquet.

For every prompt text x (base and kept variants) the BASE response y is scored under x: one
forward per pair gives the last-prompt-token hidden states of all layers, log p(y | x) and the
mean token entropy. Hidden states stay in memory only until the per-layer cosines against the
base prompt's states are taken, so the artifact holds cosines, not 30 x d floats per row.

Two per-layer curves: ``layer_cosines`` at the rendered prompt's last token, where the answer
starts (the Act axis), and ``layer_cosines_user`` at the last token of the user's own text
(``TeacherForced.hidden_user``; null when the backend gives none), a diagnostic of where a
variant's effect is read.

The replay rows (the noise floor) are scored in backend calls of their own, after the call
holding the bases and variants, so a replay never shares a batch with its base: other batch
companions, other padding. The floor thus includes what batching and padding change by
themselves (with transformers on a CPU that measured exactly 0; batched GPU kernels need not
be bitwise equal across batch shapes). Rows keep their order whatever the calls.

The measurements are stored as the backend returned them; a non-finite one (NaN, inf) is made
missing, with the reason "non-finite measurement", where deltas are taken (scoring/deltas.py).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from sago_core.artifacts.schemas import ANALYSIS, conform
from sago_core.axes.activation import layer_cosines
from sago_core.backends.protocol import Backend, ScoringRequest, TeacherForced
from sago_core.config import AnalysisSettings
from sago_core.vocabulary import BASE_VARIANT_ID, REPLAY_FAMILY

PROMPT_KEY = ["dataset", "prompt_id"]


def _score_apart(
    backend: Backend, requests: list[ScoringRequest], replay: list[bool], settings: AnalysisSettings
) -> list[TeacherForced]:
    """Score the non-replay requests in one call and the replay requests in another."""
    results: list[TeacherForced | None] = [None] * len(requests)
    for wanted in (False, True):
        index = [i for i, is_replay in enumerate(replay) if is_replay == wanted]
        if not index:
            continue
        scored = backend.score(
            [requests[i] for i in index], settings.batch_size, settings.max_batch_tokens
        )
        if len(scored) != len(index):
            raise RuntimeError(f"backend {backend.name} scored {len(scored)} of {len(index)}")
        for i, result in zip(index, scored, strict=True):
            results[i] = result
    return [r for r in results if r is not None]


def _cosines(state: np.ndarray | None, reference: np.ndarray | None) -> list[float] | None:
    if state is None or reference is None:
        return None
    return layer_cosines(state, reference).tolist()


def analyse_pairs(
    backend: Backend, generations: pl.DataFrame, settings: AnalysisSettings
) -> pl.DataFrame:
    base = generations.filter(pl.col("variant_id") == BASE_VARIANT_ID).select(
        [
            *PROMPT_KEY,
            pl.col("response_token_ids").alias("base_ids"),
            pl.col("failure_reason").alias("base_failure"),
        ]
    )
    rows = generations.join(base, on=PROMPT_KEY, how="left")
    scorable = [
        failure is None and ids is not None
        for failure, ids in zip(rows["base_failure"], rows["base_ids"], strict=True)
    ]
    requests, replay = [], []
    for text, ids, family, ok in zip(
        rows["prompt_text"], rows["base_ids"], rows["family"], scorable, strict=True
    ):
        if ok:
            requests.append(ScoringRequest(text, tuple(ids)))
            replay.append(family == REPLAY_FAMILY)
    scored = iter(_score_apart(backend, requests, replay, settings))
    unanswered = TeacherForced(None, None, None, 0, "no base answer to score (generation failed)")
    results = [next(scored) if ok else unanswered for ok in scorable]
    base_hidden: dict[tuple[str, str], tuple[np.ndarray | None, np.ndarray | None]] = {}
    for row, result in zip(rows.iter_rows(named=True), results, strict=True):
        if row["variant_id"] == BASE_VARIANT_ID:
            key = (row["dataset"], row["prompt_id"])
            base_hidden[key] = (result.hidden, result.hidden_user)
    cosines: list[list[float] | None] = []
    cosines_user: list[list[float] | None] = []
    reasons: list[str | None] = []
    for row, result in zip(rows.iter_rows(named=True), results, strict=True):
        reference, reference_user = base_hidden.get(
            (row["dataset"], row["prompt_id"]), (None, None)
        )
        cosines.append(_cosines(result.hidden, reference))
        cosines_user.append(_cosines(result.hidden_user, reference_user))
        if cosines[-1] is None:
            default = f"backend {backend.name} exposes no hidden states"
            reasons.append(result.missing_reason or default)
        else:
            reasons.append(None)
    frame = rows.with_columns(
        pl.Series("layer_cosines", cosines, dtype=pl.List(pl.Float64)),
        pl.Series("layer_cosines_user", cosines_user, dtype=pl.List(pl.Float64)),
        pl.Series("logprob", [r.logprob for r in results], dtype=pl.Float64),
        pl.Series("mean_entropy", [r.mean_entropy for r in results], dtype=pl.Float64),
        pl.Series("n_response_tokens", [r.n_response_tokens for r in results], dtype=pl.Int32),
        pl.Series("missing_reason", reasons, dtype=pl.String),
    ).with_columns(pl.col("layer_cosines").list.mean().alias("act_cos_mean"))
    return conform(frame, ANALYSIS)
