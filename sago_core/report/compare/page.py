"""``sago compare``: one report across several finished runs, from their artifacts alone.

Models keep their spec as label unless the same spec appears in more than one run; then the
run id is appended so results of different runs are never merged. Answers of one model
name from different served-model identities (``backends/served_identity.py``) are marked at
the top of the page, and so is each run's BERTScore encoder (``scoring/encoder.py``): BERT
numbers from two encoders are on two scales (``sago compare`` refuses such runs unless
asked).
"""

from __future__ import annotations

import html
import json
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl

from sago_core.artifacts.layout import MANIFEST_FILE, artifact_file
from sago_core.backends.served_identity import IdentityCheck, check_runs
from sago_core.report.page.html import render_report
from sago_core.report.page.provenance import provenance_of
from sago_core.scoring.encoder import differing, label_of, run_encoder, saved_config

FRAMES = ("summary", "scores", "deltas", "variants", "prompts", "generations")


def _shared_bertscore(run_dirs: list[Path]) -> dict[str, Any]:
    """The runs' ``bertscore`` settings when they all share one (the page's provenance)."""
    found = [(saved_config(run) or {}).get("bertscore") for run in run_dirs]
    return {"bertscore": found[0]} if found[0] and all(f == found[0] for f in found) else {}


def _labelled(run_dir: Path, frames: dict[str, pl.DataFrame], clash: set[str]) -> dict:
    run_id = run_dir.name
    out = {}
    for name, frame in frames.items():
        if "model" in frame.columns:
            frame = frame.with_columns(
                pl.when(pl.col("model").is_in(list(clash)))
                .then(pl.format("{} ({})", pl.col("model"), pl.lit(run_id)))
                .otherwise(pl.col("model"))
                .alias("model")
            )
        out[name] = frame
    return out


def identity_check(run_dirs: list[Path]) -> IdentityCheck:
    """Served-model identities across the runs (each run labelled by its folder name)."""
    return check_runs([(run.name, run) for run in run_dirs])


def identity_banner(check: IdentityCheck) -> str:
    if not check.warnings:
        return ""
    items = "".join(f"<li>{html.escape(w)}</li>" for w in check.warnings)
    return (
        "<div class='identity-warning' style='border:2px solid #b00;padding:0.5rem 1rem;"
        "margin:1rem 0;background:#fff4f4'><strong>Warning: these results mix served "
        f"models</strong><ul>{items}</ul></div>"
    )


def encoder_banner(run_dirs: list[Path]) -> str:
    """Each run's BERTScore encoder, at the top of the page; a warning when they differ."""
    encoders = [(run.name, run_encoder(run)) for run in run_dirs]
    items = "".join(
        f"<li>{html.escape(name)}: {html.escape(label_of(encoder))}</li>"
        for name, encoder in encoders
    )
    clash = differing(encoders)
    style = "border:2px solid #b00;background:#fff4f4" if clash else "border:1px solid #cdd"
    head = (
        "Warning: BERT numbers from different encoders, not comparable"
        if clash
        else "BERT numbers (SGS bert, the PSS form on BERTScore) are BERTScore F1 by"
    )
    return (
        f"<div class='encoder-note' style='{style};padding:0.5rem 1rem;margin:1rem 0'>"
        f"<strong>{head}</strong><ul>{items}</ul></div>"
    )


def compare_runs(
    run_dirs: list[Path], preamble: str = "", identity: IdentityCheck | None = None
) -> str:
    """One report across the runs; ``preamble`` (HTML) opens the page (the watch's table of
    releases); ``identity`` (computed here when not given) marks mixed served models."""
    loaded = [
        {name: pl.read_parquet(run / artifact_file(name)) for name in FRAMES} for run in run_dirs
    ]
    counts = Counter(m for frames in loaded for m in frames["summary"]["model"].unique())
    clash = {model for model, n in counts.items() if n > 1}
    labelled = [_labelled(run, frames, clash) for run, frames in zip(run_dirs, loaded, strict=True)]
    combined = {
        name: pl.concat([f[name] for f in labelled], how="diagonal_relaxed") for name in FRAMES
    }
    # prompts and variants repeat across runs of the same data: keep one copy of each row
    for name in ("prompts", "variants"):
        combined[name] = combined[name].unique(maintain_order=True)
    models: dict[str, Any] = {}
    packages: dict[str, str] = {}
    for run in run_dirs:
        manifest = provenance_of(json.loads((run / MANIFEST_FILE).read_text(encoding="utf-8")))
        for spec, info in (manifest.get("models") or {}).items():
            models[f"{spec} ({run.name})" if spec in clash else spec] = info
        packages.update(manifest.get("packages") or {})
    provenance = {
        "run_id": ", ".join(run.name for run in run_dirs),
        "models": models,
        "packages": packages,
        "config": {"preset": "comparison", **_shared_bertscore(run_dirs)},
    }
    page = render_report(
        combined["summary"],
        combined["scores"],
        combined["deltas"],
        combined["variants"],
        combined["prompts"],
        combined["generations"],
        provenance,
    )
    banner = identity_banner(identity if identity is not None else identity_check(run_dirs))
    opening = banner + encoder_banner(run_dirs) + preamble
    return page.replace("<body>", f"<body>{opening}", 1) if opening else page
