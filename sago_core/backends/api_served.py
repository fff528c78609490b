"""What the provider says about the model that answered: recorded per answer, compared per run.

Providers update models behind an alias; the response's own ``model`` field, its
``system_fingerprint`` and some version headers (where LiteLLM passes them on) then change
under the same requested name. Each API answer keeps them in its row's ``engine`` JSON
(``served_model``, ``system_fingerprint``, ``served_headers``), cached answers included.
``identities_of`` lists the identities a generations table holds per model; ``drifted``
names the models whose answers span more than one, so a summary, a report or a comparison
can flag (or refuse) numbers that mix two models.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

IDENTITY_FIELDS = ("served_model", "system_fingerprint", "served_headers")
# response headers that name a model version (lower case; LiteLLM prefixes provider
# headers with "llm_provider-")
VERSION_HEADERS = ("openai-model", "x-model-version", "anthropic-model", "x-ms-model-version")


def served_identity(response: Any) -> dict[str, str]:
    """The answering model's identity as the response states it (absent fields left out)."""
    found: dict[str, str] = {}
    model = getattr(response, "model", None)
    if isinstance(model, str) and model:
        found["served_model"] = model
    fingerprint = getattr(response, "system_fingerprint", None)
    if isinstance(fingerprint, str) and fingerprint:
        found["system_fingerprint"] = fingerprint
    hidden = getattr(response, "_hidden_params", None)
    headers = hidden.get("additional_headers") if isinstance(hidden, Mapping) else None
    versions = {
        name.lower().removeprefix("llm_provider-"): str(value)
        for name, value in (headers or {}).items()
        if name.lower().removeprefix("llm_provider-") in VERSION_HEADERS
    }
    if versions:
        found["served_headers"] = json.dumps(versions, sort_keys=True)
    return found


def _identity(engine: str | None) -> str | None:
    try:
        record = json.loads(engine) if engine else {}
    except ValueError:
        return None
    parts = {k: record[k] for k in IDENTITY_FIELDS if record.get(k)}
    return json.dumps(parts, sort_keys=True) if parts else None


def identities_of(generations: pl.DataFrame) -> pl.DataFrame:
    """Per model, each identity its answers report and how many answers did: columns
    model, served_model, system_fingerprint, served_headers, answers. Rows without an
    answer (failures) or without any identity (a local model) are left out, and so is a
    table without an ``engine`` column (nothing recorded who answered)."""
    if "engine" not in generations.columns:
        generations = generations.with_columns(pl.lit(None, dtype=pl.String).alias("engine"))
    answered = generations.filter(pl.col("response_text").is_not_null())
    identity = pl.Series("identity", [_identity(e) for e in answered["engine"]], dtype=pl.String)
    frame = (
        answered.select("model")
        .with_columns(identity)
        .drop_nulls("identity")
        .group_by("model", "identity")
        .agg(pl.len().alias("answers"))
        .sort("model", "identity")
    )
    fields = [json.loads(i) for i in frame["identity"]]
    return frame.select("model").with_columns(
        *(pl.Series(f, [d.get(f) for d in fields], dtype=pl.String) for f in IDENTITY_FIELDS),
        frame["answers"].cast(pl.Int64),
    )


def drifted(generations: pl.DataFrame) -> dict[str, list[dict[str, Any]]]:
    """Models whose answers report more than one identity -> those identities (with counts).
    Field by field: two answers differ only where both state a field and the values differ
    (a provider that sends ``system_fingerprint`` on some answers only is not drift)."""
    return drifted_identities(identities_of(generations))


def drifted_identities(found: pl.DataFrame) -> dict[str, list[dict[str, Any]]]:
    """``drifted`` over a table ``identities_of`` made (one run's identities)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for (model,), rows in found.group_by("model", maintain_order=True):
        if any(rows[f].drop_nulls().n_unique() > 1 for f in IDENTITY_FIELDS):
            out[str(model)] = rows.drop("model").to_dicts()
    return out


def describe_drift(drift: Mapping[str, list[dict[str, Any]]]) -> list[str]:
    """One line per drifted model: its identities and how many answers each gave."""
    return [
        f"{model}: answered by {len(rows)} identities: " + describe_identities(rows)
        for model, rows in drift.items()
    ]


def describe_identities(rows: Sequence[Mapping[str, Any]]) -> str:
    """Identities (rows of ``identities_of``) and how many answers each gave, in a line."""
    parts = []
    for row in rows:
        named = ", ".join(f"{k} {row[k]}" for k in IDENTITY_FIELDS if row.get(k))
        parts.append(f"{named} ({row['answers']} answers)")
    return "; ".join(parts)
