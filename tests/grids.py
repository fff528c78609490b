"""The small variant grid the flow, conformance and reliability tests share: one register
pair at the suffix, one strength of each noise subtype, global; structural off unless
asked for. Each test states only what it changes."""

from __future__ import annotations

from typing import Any


def tiny_variants(
    strengths: tuple[int, ...] = (-2, 2), structural: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "register": {"strengths": list(strengths), "positions": ["suffix"]},
        "noise": {
            "spacing": [5],
            "punctuation": [3],
            "capitalization": [50],
            "positions": ["global"],
        },
        "structural": structural,
    }


def noise_only() -> dict[str, Any]:
    """Two noise variants (spacing 5, punctuation 3, global) and nothing else."""
    return {
        "register": None,
        "structural": None,
        "noise": {
            "spacing": [5],
            "punctuation": [3],
            "capitalization": [],
            "positions": ["global"],
        },
    }
