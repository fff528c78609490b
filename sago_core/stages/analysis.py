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

With the row cache (``.cache/rows/``), a row measured before is read back, and so are the
hidden states of each base prompt measured (``references``, float32 bytes): a later stage that
asks new variants of a prompt (a budgeted run's next round, a full run after a budgeted one)
forces only the new rows and takes their cosines against the base's cached states: those
forcing the base again would give, up to what batch composition changes (what the replay
floor measures).

The measurements are stored as the backend returned them; a non-finite one (NaN, inf) is made
missing, with the reason "non-finite measurement", where deltas are taken (scoring/deltas.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from sago_core.artifacts.row_cache import KEY, RowCache, digest
from sago_core.artifacts.schemas import ANALYSIS, Schema, conform
from sago_core.axes.activation import layer_cosines
from sago_core.backends.protocol import Backend, ScoringRequest, TeacherForced
from sago_core.backends.target import ModelTarget
from sago_core.config import AnalysisSettings
from sago_core.stages.generation import model_scope
from sago_core.vocabulary import BASE_VARIANT_ID, PROMPT_KEY, REPLAY_FAMILY

Place = tuple[str, str]  # (dataset, prompt_id)


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
# A base prompt's hidden states (the cosines' reference), float32 bytes of (layers, width).
REFERENCE_SCHEMA: Schema = {"layers": pl.Int32, "hidden": pl.Binary, "hidden_user": pl.Binary}

Reference = tuple[np.ndarray | None, np.ndarray | None]  # (hidden, hidden_user)


@dataclass(frozen=True)
class MeasureCache:
    """Teacher-forced rows, and the hidden states of the bases they were measured against:
    a later stage measuring new variants of a prompt reads its base's states instead of
    forcing the base again."""

    rows: RowCache
    references: RowCache

    def get_references(self, keys: dict[Place, str]) -> dict[Place, Reference]:
        found = self.references.get(list(keys.values()))
        by_key = {row[KEY]: row for row in found.iter_rows(named=True)}
        return {p: _unpacked(by_key[k]) for p, k in keys.items() if k in by_key}

    def put_references(self, states: dict[str, Reference]) -> None:
        packed = [_packed(key, hidden, user) for key, (hidden, user) in states.items()]
        rows = [row for row in packed if row is not None]
        self.references.put(pl.DataFrame(rows, schema=self.references.schema))


def _packed(key: str, hidden: np.ndarray | None, user: np.ndarray | None) -> dict | None:
    if hidden is None:
        return None
    layers = int(hidden.shape[0])

    def raw(state: np.ndarray | None) -> bytes | None:
        return None if state is None else np.ascontiguousarray(state, np.float32).tobytes()

    return {KEY: key, "layers": layers, "hidden": raw(hidden), "hidden_user": raw(user)}


def _unpacked(row: dict) -> Reference:
    def state(raw: bytes | None) -> np.ndarray | None:
        return None if raw is None else np.frombuffer(raw, np.float32).reshape(row["layers"], -1)

    return state(row["hidden"]), state(row["hidden_user"])


def measure_cache(cache_root: Path, target: ModelTarget) -> MeasureCache:
    """Teacher-forced rows of one model; the analysis settings are batch shapes only."""
    scope = {"model": model_scope(target), "version": MEASURE_ROW_VERSION}
    return MeasureCache(
        RowCache(cache_root, "analysis", scope, {c: ANALYSIS[c] for c in MEASURE_COLUMNS}),
        RowCache(cache_root, "references", scope, REFERENCE_SCHEMA),
    )


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
    reuse: MeasureCache | None = None,
) -> pl.DataFrame:
    """Every row's teacher-forced measurements; with ``reuse``, a row some run measured
    before is read back, and a prompt with any row to measure takes its base's hidden states
    (the cosines' reference) from the cache, or scores its base with it when none is
    cached."""
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
    cached = (
        reuse.rows.get([k for k, ok in zip(keys, scorable, strict=True) if ok]) if reuse else None
    )
    known: dict[str, dict] = (
        {row[KEY]: row for row in cached.iter_rows(named=True)} if cached is not None else {}
    )
    places = list(zip(rows["dataset"], rows["prompt_id"], strict=True))
    variant_ids = rows["variant_id"].to_list()
    to_measure = {
        p for p, k, ok in zip(places, keys, scorable, strict=True) if ok and k not in known
    }
    base_keys = {
        p: k
        for p, k, v in zip(places, keys, variant_ids, strict=True)
        if v == BASE_VARIANT_ID and p in to_measure and k in known
    }
    references = reuse.get_references(base_keys) if reuse is not None else {}
    scored_here = [
        ok
        and (k not in known or (v == BASE_VARIANT_ID and p in to_measure and p not in references))
        for ok, k, v, p in zip(scorable, keys, variant_ids, places, strict=True)
    ]
    measured, states = measure_rows(backend, rows, scored_here, settings, references)
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
        reuse.rows.put(
            pl.DataFrame(
                [{KEY: keys[i], **{c: values[i][c] for c in MEASURE_COLUMNS}} for i in fresh],
                schema=reuse.rows.schema,
            )
        )
        reuse.put_references(
            {
                keys[i]: states[places[i]]
                for i, (here, v) in enumerate(zip(scored_here, variant_ids, strict=True))
                if here and v == BASE_VARIANT_ID and places[i] in states
            }
        )
    frame = rows.with_columns(
        pl.Series(c, [v[c] for v in values], dtype=ANALYSIS[c]) for c in MEASURE_COLUMNS
    ).with_columns(pl.col("layer_cosines").list.mean().alias("act_cos_mean"))
    return conform(frame, ANALYSIS)


def measure_rows(
    backend: Backend,
    rows: pl.DataFrame,
    here: list[bool],
    settings: AnalysisSettings,
    references: dict[Place, Reference] | None = None,
) -> tuple[dict[int, dict], dict[Place, Reference]]:
    """The rows marked ``here`` teacher-forced: their measurements by row index, the
    per-layer cosines taken against their base's hidden states (from ``references``, else
    from the base, which is then among them), and the hidden states of the bases forced
    here."""
    index = [i for i, flag in enumerate(here) if flag]
    if not index:
        return {}, {}
    picked = rows[index]
    requests = [
        ScoringRequest(text, tuple(ids))
        for text, ids in zip(picked["prompt_text"], picked["base_ids"], strict=True)
    ]
    replay = [family == REPLAY_FAMILY for family in picked["family"]]
    results = _score_apart(backend, requests, replay, settings)
    forced: dict[Place, Reference] = {}
    base_missing: dict[Place, str] = {}
    for row, result in zip(picked.iter_rows(named=True), results, strict=True):
        if row["variant_id"] == BASE_VARIANT_ID:
            forced[(row["dataset"], row["prompt_id"])] = (result.hidden, result.hidden_user)
            if result.hidden is None and result.missing_reason:
                base_missing[(row["dataset"], row["prompt_id"])] = result.missing_reason
    base_hidden = {**(references or {}), **forced}
    measured: dict[int, dict] = {}
    for i, row, result in zip(index, picked.iter_rows(named=True), results, strict=True):
        reference, reference_user = base_hidden.get(
            (row["dataset"], row["prompt_id"]), (None, None)
        )
        cosines = _cosines(result.hidden, reference)
        reason = None
        place = (row["dataset"], row["prompt_id"])
        if cosines is None and result.hidden is not None and place in base_missing:
            reason = f"no base hidden states: {base_missing[place]}"
        elif cosines is None:
            reason = result.missing_reason or f"backend {backend.name} exposes no hidden states"
        measured[i] = {
            "layer_cosines": cosines,
            "layer_cosines_user": _cosines(result.hidden_user, reference_user),
            "logprob": result.logprob,
            "mean_entropy": result.mean_entropy,
            "n_response_tokens": result.n_response_tokens,
            "missing_reason": reason,
        }
    return measured, forced
