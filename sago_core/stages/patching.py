"""Stage: activation patching -> patching.parquet (which layers carry a variant's change).

For a sample of variants (``sample_variants``: seeded, stratified by family, at most
``max_variants``), the variant prompt is teacher-forced with the base answer's token ids (the
Prob axis' ids, from generations.parquet, exactly as the scoring pass does) once per chosen
layer l, with layer l's output at the last prompt token replaced by the base prompt's
(``PatchRequest``). Per (variant, layer):

- ``recovery = (logp_patched - logp_variant) / (logp_base - logp_variant)``: the share of the
  Prob delta the base state at layer l restores (0: nothing, 1: all of it). When the variant
  barely moves log p(base answer) (the relative guard of ``statistics/recovery.py``: the gap
  below 1% of max(|logp_base|, 1 nat)) there is nothing to restore: null, with that reason.
  ``gap`` (logp_base - logp_variant, nats) and ``relative_gap`` (|gap| over that scale) sit
  beside it. Per-layer figures are never a mean of these ratios: the report reads the ratio
  of sums and the median (``statistics.recovery.recovery_by_layer``).
- ``kl_first_token = KL(p_base || p_patched)`` of the first answer token's next-token
  distribution (nats); ``kl_variant`` is the same for the unpatched variant.

The unpatched rows (each base and each sampled variant) are run through the same call as the
patched ones, so every log-probability compared comes from one code path. The base states
patched in come from that base row. The replay (the base prompt itself) is never sampled:
there is nothing to patch. A backend without layers (API, mock) leaves one row per sampled
variant with a null layer and the reason.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from sago_core.artifacts.schemas import PATCHING, conform, empty
from sago_core.backends.patching import PatchedScore, Patcher, PatchRequest, patcher_of
from sago_core.backends.protocol import Backend
from sago_core.config import PatchingSettings
from sago_core.errors import ConfigError
from sago_core.statistics.recovery import NO_CHANGE, recovery_refusal, relative_gap
from sago_core.variants.seeding import variant_seed
from sago_core.vocabulary import BASE_VARIANT_ID, NON_FINITE, PROMPT_KEY, REPLAY_FAMILY


def candidates(generations: pl.DataFrame, analysis: pl.DataFrame) -> pl.DataFrame:
    """Variants that can be patched: not the base or its replay, a base answer with at least
    one token, and a finite log-probability in the scoring pass (variant and base)."""
    base = generations.filter(pl.col("variant_id") == BASE_VARIANT_ID).select(
        *PROMPT_KEY,
        pl.col("prompt_text").alias("base_text"),
        pl.col("response_token_ids").alias("base_ids"),
        pl.col("failure_reason").alias("base_failure"),
    )
    scored = analysis.select(*PROMPT_KEY, "variant_id", "logprob")
    base_scored = scored.filter(pl.col("variant_id") == BASE_VARIANT_ID).select(
        *PROMPT_KEY, pl.col("logprob").alias("base_logprob")
    )
    finite = pl.col("logprob").is_not_null() & pl.col("logprob").is_finite()
    return (
        generations.filter(
            (pl.col("variant_id") != BASE_VARIANT_ID) & (pl.col("family") != REPLAY_FAMILY)
        )
        .join(base, on=PROMPT_KEY, how="inner")
        .join(scored, on=[*PROMPT_KEY, "variant_id"], how="inner")
        .join(base_scored, on=PROMPT_KEY, how="inner")
        .filter(
            pl.col("base_failure").is_null()
            & (pl.col("base_ids").list.len() > 0)
            & finite
            & pl.col("base_logprob").is_finite()
        )
    )


def sample_variants(frame: pl.DataFrame, max_variants: int, seed: int) -> pl.DataFrame:
    """At most ``max_variants`` rows, stratified by family: families take turns (in name
    order), each in a seeded order of its variants (the variant's identity hash, so the
    sample never depends on row order)."""
    keyed = frame.with_columns(
        pl.struct("dataset", "prompt_id", "variant_id")
        .map_elements(
            lambda r: variant_seed(seed, r["dataset"], r["prompt_id"], r["variant_id"]),
            return_dtype=pl.UInt64,
        )
        .alias("_order")
    )
    ranked = keyed.with_columns(
        pl.col("_order").rank("ordinal").over("family").alias("_turn")
    ).sort("_turn", "family")
    return ranked.head(max_variants).drop("_order", "_turn")


def chosen_layers(settings: PatchingSettings, n_layers: int) -> list[int]:
    if settings.layers == "all":
        return list(range(1, n_layers + 1))
    beyond = [layer for layer in settings.layers if layer > n_layers]
    if beyond:
        raise ConfigError(
            f"analysis.patching.layers: layer {beyond[0]} is beyond the model's {n_layers} layers"
        )
    return list(settings.layers)


def kl_divergence(reference: np.ndarray, other: np.ndarray) -> float | None:
    """KL(p || q) in nats from two log-softmax vectors; None when it is not finite."""
    p_log = reference.astype(np.float64)
    q_log = other.astype(np.float64)
    p = np.exp(p_log)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        terms = np.where(p > 0, p * (p_log - q_log), 0.0)
    value = float(terms.sum())
    return max(value, 0.0) if np.isfinite(value) else None


@dataclass(frozen=True)
class _Reference:
    base: PatchedScore
    variant: PatchedScore


def _references(
    patcher: Patcher, sample: pl.DataFrame, batch_size: int, max_batch_tokens: int | None
) -> list[_Reference]:
    """The unpatched base and variant rows (bases scored once per prompt)."""
    bases = sample.unique(PROMPT_KEY, keep="first", maintain_order=True)
    base_index = {
        (r["dataset"], r["prompt_id"]): i for i, r in enumerate(bases.iter_rows(named=True))
    }
    requests = [
        PatchRequest(r["base_text"], tuple(r["base_ids"])) for r in bases.iter_rows(named=True)
    ]
    requests += [
        PatchRequest(r["prompt_text"], tuple(r["base_ids"])) for r in sample.iter_rows(named=True)
    ]
    scored = patcher.patch(requests, batch_size, max_batch_tokens)
    n_bases = len(base_index)
    return [
        _Reference(scored[base_index[(r["dataset"], r["prompt_id"])]], scored[n_bases + i])
        for i, r in enumerate(sample.iter_rows(named=True))
    ]


def _measure(
    reference: _Reference, patched: PatchedScore
) -> tuple[float | None, float | None, str | None]:
    """(recovery, kl_first_token, missing reason) of one patched row."""
    logp_base, logp_variant = reference.base.logprob, reference.variant.logprob
    reasons: list[str] = []
    recovery: float | None = None
    values = (logp_base, logp_variant, patched.logprob)
    if not all(np.isfinite(v) for v in values):
        reasons.append(NON_FINITE)
    elif recovery_refusal(logp_base, logp_variant) is not None:
        reasons.append(NO_CHANGE)
    else:
        recovery = (patched.logprob - logp_variant) / (logp_base - logp_variant)
    kl = None
    base_first = reference.base.first_token_logprobs
    if base_first is not None and patched.first_token_logprobs is not None:
        kl = kl_divergence(base_first, patched.first_token_logprobs)
        if kl is None and NON_FINITE not in reasons:
            reasons.append(NON_FINITE)
    return recovery, kl, "; ".join(reasons) or None


def _unpatchable(model: str, sample: pl.DataFrame, reason: str) -> pl.DataFrame:
    return conform(
        sample.with_columns(
            pl.lit(model).alias("model"),
            *(
                pl.lit(None, pl.Float64).alias(c)
                for c in (
                    "recovery",
                    "kl_first_token",
                    "kl_variant",
                    "logprob_base",
                    "logprob_variant",
                    "logprob_patched",
                    "gap",
                    "relative_gap",
                )
            ),
            pl.lit(None, pl.Int32).alias("layer"),
            pl.lit(reason).alias("missing_reason"),
        ),
        PATCHING,
    )


def patch_variants(
    backend: Backend,
    model: str,
    generations: pl.DataFrame,
    analysis: pl.DataFrame,
    settings: PatchingSettings,
    seed: int,
    batch_size: int,
    max_batch_tokens: int | None = None,
) -> pl.DataFrame:
    """One row per (sampled variant, chosen layer) of ``model`` (``PATCHING``)."""
    sample = sample_variants(candidates(generations, analysis), settings.max_variants, seed)
    patcher = patcher_of(backend)
    if patcher is None:
        reason = f"backend {backend.name} cannot patch activations (no layers to hook)"
        return _unpatchable(model, sample, reason)
    layers = chosen_layers(settings, patcher.n_layers)
    references = _references(patcher, sample, batch_size, max_batch_tokens)
    per_call = max(1, batch_size // len(layers))
    records: list[dict[str, object]] = []
    rows = list(sample.iter_rows(named=True))
    for start in range(0, len(rows), per_call):
        chunk = list(range(start, min(start + per_call, len(rows))))
        requests = [
            PatchRequest(
                rows[i]["prompt_text"],
                tuple(rows[i]["base_ids"]),
                layer,
                references[i].base.states[layer - 1],
            )
            for i in chunk
            for layer in layers
        ]
        patched = iter(patcher.patch(requests, batch_size, max_batch_tokens))
        for i in chunk:
            records.extend(_rows_of(rows[i], references[i], layers, patched))
    if not records:
        return empty(PATCHING)
    schema = {c: t for c, t in PATCHING.items() if c != "model"}
    frame = pl.DataFrame(records, schema=schema)
    return conform(frame.with_columns(pl.lit(model).alias("model")), PATCHING)


def _rows_of(
    row: dict[str, object],
    reference: _Reference,
    layers: Sequence[int],
    patched: Iterator[PatchedScore],
) -> list[dict[str, object]]:
    base_first = reference.base.first_token_logprobs
    variant_first = reference.variant.first_token_logprobs
    kl_variant = (
        kl_divergence(base_first, variant_first)
        if base_first is not None and variant_first is not None
        else None
    )
    logp_base, logp_variant = reference.base.logprob, reference.variant.logprob
    share = relative_gap(logp_base, logp_variant)
    gap = logp_base - logp_variant if share is not None else None
    out = []
    for layer in layers:
        score = next(patched)
        recovery, kl, reason = _measure(reference, score)
        out.append(
            {
                **{c: row[c] for c in (*PROMPT_KEY, "variant_id", "family", "subtype", "strength")},
                "layer": layer,
                "recovery": recovery,
                "kl_first_token": kl,
                "kl_variant": kl_variant,
                "logprob_base": reference.base.logprob,
                "logprob_variant": reference.variant.logprob,
                "logprob_patched": score.logprob,
                "missing_reason": reason,
                "gap": gap,
                "relative_gap": share,
            }
        )
    return out
