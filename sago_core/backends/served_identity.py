"""Which served model answered, compared across the runs a comparison puts side by side.

An API model can change under its requested name (a provider moving an alias); each answer
records what the provider said (``backends/api_served.py``). A comparison of two runs then
has two ways to mix models: one run's answers for a model span more than one identity
(drift inside a run), or the two runs' answers for the paired models come from different
identities (a field both state, with different values: ``served_model``,
``system_fingerprint``, version headers). ``sago compare`` and ``sago card`` mark both
prominently; with ``--strict-identity`` they refuse, naming the identities.

Runs without recorded identities (local models, runs written before answers recorded
them, hand-built tables) are neither marked nor refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from sago_core.artifacts.layout import GENERATIONS_FILE
from sago_core.backends.api_served import (
    IDENTITY_FIELDS,
    describe_drift,
    describe_identities,
    drifted_identities,
    identities_of,
)
from sago_core.errors import ConfigError

NEEDED = ("model", "response_text", "engine")
STRICT_FLAG = "--strict-identity"


class IdentityMismatchError(ConfigError):
    """A comparison across served-model identities, refused under ``--strict-identity``."""


@dataclass(frozen=True)
class IdentityCheck:
    mismatches: list[str] = field(default_factory=list)  # across the two runs
    drift: list[str] = field(default_factory=list)  # inside one run

    @property
    def warnings(self) -> list[str]:
        return [*self.mismatches, *self.drift]

    def enforce(self, strict: bool) -> None:
        """Under ``strict``, refuse a comparison with any warning, naming the identities."""
        if strict and self.warnings:
            raise IdentityMismatchError(
                "refusing to compare across served-model identities: "
                + "; ".join(self.warnings)
                + f" (without {STRICT_FLAG} the comparison is made and marked)"
            )


def served_identities(run_dir: Path) -> pl.DataFrame:
    """``identities_of`` the run's generations (empty where none were recorded)."""
    path = run_dir / GENERATIONS_FILE
    columns = set(pl.read_parquet_schema(path)) if path.is_file() else set()
    if not {"model", "response_text"} <= columns:
        return identities_of(pl.DataFrame(schema=dict.fromkeys(NEEDED, pl.String)))
    return identities_of(pl.read_parquet(path, columns=[c for c in NEEDED if c in columns]))


def _of(identities: pl.DataFrame, model: str) -> list[dict[str, Any]]:
    return identities.filter(pl.col("model") == model).drop("model").to_dicts()


def differ(rows_a: Sequence[dict[str, Any]], rows_b: Sequence[dict[str, Any]]) -> list[str]:
    """The identity fields both sides state with different values."""
    out = []
    for name in IDENTITY_FIELDS:
        a = {r[name] for r in rows_a if r.get(name)}
        b = {r[name] for r in rows_b if r.get(name)}
        if a and b and a != b:
            out.append(name)
    return out


def check_runs(
    runs: Sequence[tuple[str, Path]], pairs: Sequence[tuple[str, str]] | None = None
) -> IdentityCheck:
    """Identity warnings for a comparison of ``runs`` ((label, folder), first one first).
    ``pairs`` (two runs only): (model in the first, model in the second) compared; without
    it each model is compared with the same model name in the first run that holds it."""
    identities = [(label, served_identities(run)) for label, run in runs]
    mismatches: list[str] = []
    drift: list[str] = []
    for label, found in identities:
        drift += [f"{label}: {line}" for line in describe_drift(drifted_identities(found))]
    if pairs is not None and len(identities) == 2:
        (label_a, a), (label_b, b) = identities
        for model_a, model_b in pairs:
            mismatches += _mismatch(label_a, a, model_a, label_b, b, model_b)
        return IdentityCheck(mismatches, drift)
    for i, (label_b, b) in enumerate(identities):
        for model in sorted(b["model"].unique().to_list()):
            first = next(((lab, a) for lab, a in identities[:i] if model in set(a["model"])), None)
            if first is not None:
                mismatches += _mismatch(first[0], first[1], model, label_b, b, model)
    return IdentityCheck(mismatches, drift)


def _mismatch(
    label_a: str, a: pl.DataFrame, model_a: str, label_b: str, b: pl.DataFrame, model_b: str
) -> list[str]:
    rows_a, rows_b = _of(a, model_a), _of(b, model_b)
    fields = differ(rows_a, rows_b)
    if not fields:
        return []
    return [
        f"compares two different served models ({', '.join(fields)} differ): {model_a} in "
        f"{label_a} answered as {describe_identities(rows_a)}; {model_b} in {label_b} "
        f"answered as {describe_identities(rows_b)}"
    ]
