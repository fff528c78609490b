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

from pathlib import Path

import numpy as np
import polars as pl

from sago_core.artifacts.row_cache import KEY, RowCache, digest
from sago_core.artifacts.schemas import ANALYSIS, conform
from sago_core.axes.activation import layer_cosines
from sago_core.backends.protocol import Backend, ScoringRequest, TeacherForced
from sago_core.backends.target import ModelTarget
from sago_core.config import AnalysisSettings
from sago_core.stages.generation import model_scope
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


# What a cached teacher-forced row holds (row_cache.py); its version is part of its scope.
MEASURE_COLUMNS = [
    "layer_cosines",
    "layer_cosines_user",
    "logprob",
    "mean_entropy",
    "n_response_tokens",
    "missing_reason",
]
MEASURE_ROW_VERSION = 1


def measure_cache(cache_root: Path, target: ModelTarget) -> RowCache:
    """Teacher-forced rows of one model; the analysis settings are batch shapes only."""
    scope = {"model": model_scope(target), "version": MEASURE_ROW_VERSION}
    return RowCache(cache_root, "analysis", scope, {c: ANALYSIS[c] for c in MEASURE_COLUMNS})


def measure_keys(rows: pl.DataFrame) -> list[str]:
    """A row's key: its prompt text, the base answer forced under it, the base prompt (the
    cosines' reference) and whether it is a replay (scored apart)."""
    return [
        digest([text, base_text, list(ids) if ids is not None else None, family == REPLAY_FAMILY])
        for text, base_text, ids, family in zip(
            rows["prompt_text"], rows["base_text"], rows["base_ids"], rows["family"], strict=True
        )
    ]


def analyse_pairs(
    backend: Backend,
    generations: pl.DataFrame,
    settings: AnalysisSettings,
    reuse: RowCache | None = None,
) -> pl.DataFrame:
    """Every row's teacher-forced measurements; with ``reuse``, a row some run measured
    before is read back, and a prompt with any row to measure is scored with its base (the
    cosines' reference), whose own row may be cached."""
    base = generations.filter(pl.col("variant_id") == BASE_VARIANT_ID).select(
        [
            *PROMPT_KEY,
            pl.col("response_token_ids").alias("base_ids"),
            pl.col("failure_reason").alias("base_failure"),
            pl.col("prompt_text").alias("base_text"),
        ]
    )
    rows = generations.join(base, on=PROMPT_KEY, how="left")
    scorable = [
        failure is None and ids is not None
        for failure, ids in zip(rows["base_failure"], rows["base_ids"], strict=True)
    ]
    keys = measure_keys(rows) if reuse is not None else [""] * rows.height
    cached = reuse.get([k for k, ok in zip(keys, scorable, strict=True) if ok]) if reuse else None
    known: dict[str, dict] = (
        {row[KEY]: row for row in cached.iter_rows(named=True)} if cached is not None else {}
    )
    places = list(zip(rows["dataset"], rows["prompt_id"], strict=True))
    to_measure = {
        p for p, k, ok in zip(places, keys, scorable, strict=True) if ok and k not in known
    }
    scored_here = [
        ok and (k not in known or (v == BASE_VARIANT_ID and p in to_measure))
        for ok, k, v, p in zip(scorable, keys, rows["variant_id"], places, strict=True)
    ]
    measured = measure_rows(backend, rows, scored_here, settings)
    unanswered = dict.fromkeys(MEASURE_COLUMNS) | {
        "n_response_tokens": 0,
        "missing_reason": "no base answer to score (generation failed)",
    }
    values = [
        measured[i] if here else (known[k] if ok else unanswered)
        for i, (here, k, ok) in enumerate(zip(scored_here, keys, scorable, strict=True))
    ]
    if reuse is not None:
        fresh = [
            i
            for i, (here, k) in enumerate(zip(scored_here, keys, strict=True))
            if here and k not in known
        ]
        reuse.put(
            pl.DataFrame(
                [{KEY: keys[i], **{c: values[i][c] for c in MEASURE_COLUMNS}} for i in fresh],
                schema=reuse.schema,
            )
        )
    frame = rows.with_columns(
        pl.Series(c, [v[c] for v in values], dtype=ANALYSIS[c]) for c in MEASURE_COLUMNS
    ).with_columns(pl.col("layer_cosines").list.mean().alias("act_cos_mean"))
    return conform(frame, ANALYSIS)


def measure_rows(
    backend: Backend, rows: pl.DataFrame, here: list[bool], settings: AnalysisSettings
) -> dict[int, dict]:
    """The rows marked ``here`` teacher-forced (their bases among them): their measurements
    by row index, the per-layer cosines taken against their base's hidden states."""
    index = [i for i, flag in enumerate(here) if flag]
    if not index:
        return {}
    picked = rows[index]
    requests = [
        ScoringRequest(text, tuple(ids))
        for text, ids in zip(picked["prompt_text"], picked["base_ids"], strict=True)
    ]
    replay = [family == REPLAY_FAMILY for family in picked["family"]]
    results = _score_apart(backend, requests, replay, settings)
    base_hidden: dict[tuple[str, str], tuple[np.ndarray | None, np.ndarray | None]] = {}
    for row, result in zip(picked.iter_rows(named=True), results, strict=True):
        if row["variant_id"] == BASE_VARIANT_ID:
            base_hidden[(row["dataset"], row["prompt_id"])] = (result.hidden, result.hidden_user)
    measured: dict[int, dict] = {}
    for i, row, result in zip(index, picked.iter_rows(named=True), results, strict=True):
        reference, reference_user = base_hidden.get(
            (row["dataset"], row["prompt_id"]), (None, None)
        )
        cosines = _cosines(result.hidden, reference)
        reason = None
        if cosines is None:
            reason = result.missing_reason or f"backend {backend.name} exposes no hidden states"
        measured[i] = {
            "layer_cosines": cosines,
            "layer_cosines_user": _cosines(result.hidden_user, reference_user),
            "logprob": result.logprob,
            "mean_entropy": result.mean_entropy,
            "n_response_tokens": result.n_response_tokens,
            "missing_reason": reason,
        }
    return measured
