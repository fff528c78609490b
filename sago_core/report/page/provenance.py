"""The report page's account of where its numbers come from: the manifest's provenance
(config, seed, models, packages, integrity, an external source), prompts with unfilled
placeholders, and answers whose served model changed during the run."""

from __future__ import annotations

import html
import json
from datetime import UTC, datetime
from typing import Any

import polars as pl

from sago_core.backends.api_served import describe_drift, drifted
from sago_core.data.placeholders import find_placeholders
from sago_core.report.markup import table as _table


def provenance_table(manifest: dict[str, Any]) -> str:
    models = manifest.get("models", {})
    rows = [
        [
            html.escape(spec),
            html.escape(info.get("identity", "")),
            html.escape(info.get("kind", "")),
        ]
        for spec, info in models.items()
    ]
    packages = ", ".join(f"{k} {v}" for k, v in sorted(manifest.get("packages", {}).items()))
    config = manifest.get("config", {})
    return (
        _table(["model", "identity", "kind"], rows, left=3)
        + f"<p>Run <code>{html.escape(str(manifest.get('run_id')))}</code>, rendered "
        f"{datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}; config hash "
        f"<code>{html.escape(str(manifest.get('config_hash', ''))[:16])}</code>; seed "
        f"{html.escape(str(manifest.get('seed')))}; "
        f"preset {html.escape(str(config.get('preset')))}; "
        f"BERTScore {html.escape(json.dumps(config.get('bertscore')))}.</p>"
        f"<p>Packages: {html.escape(packages)}.</p>"
        + _integrity(manifest.get("integrity"))
        + _external(manifest.get("external"))
    )


def placeholder_note(prompts: pl.DataFrame) -> str:
    """How many prompts hold placeholder-like text (a template field left unfilled): the
    loader warns about them by row; here they are counted, and the first few named (a
    prompts table without its texts, as some hand-built ones are, has nothing to count)."""
    if "prompt" not in prompts.columns:
        return ""
    flagged = [
        f"{r['dataset']}/{r['prompt_id']}"
        for r in prompts.select("dataset", "prompt_id", "prompt").iter_rows(named=True)
        if find_placeholders(r["prompt"] or "")
    ]
    named = f": {html.escape(', '.join(flagged[:10]))}" if flagged else ""
    more = f" and {len(flagged) - 10} more" if len(flagged) > 10 else ""
    return (
        f"<p>Prompts with placeholder-like text (an unfilled template field such as "
        f"<code>{{question}}</code>; LaTeX and code braces do not count): "
        f"{len(flagged)}{named}{more}.</p>"
    )


def identity_drift(generations: pl.DataFrame) -> str:
    """A warning when an API model's answers came from more than one served identity."""
    lines = describe_drift(drifted(generations))
    if not lines:
        return ""
    items = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
    return (
        "<h2>Model identity drift</h2><p><b>Warning</b>: these models' answers came from "
        f"more than one served model or system fingerprint; their deltas may mix two "
        f"models.</p><ul>{items}</ul>"
    )


def _integrity(counts: dict[str, int] | None) -> str:
    """Cached artifacts that failed their recorded sha256 and were recomputed."""
    found = sum((counts or {}).values())
    detail = ", ".join(f"{reason}: {n}" for reason, n in sorted((counts or {}).items()))
    return (
        f"<p>Cache integrity: {found} cached artifact(s) recomputed"
        + (f" ({html.escape(detail)})" if detail else "")
        + ".</p>"
    )


def _external(source: dict[str, Any] | None) -> str:
    """``sago score``: which file was scored, read how, and the reader's counts."""
    if not source:
        return ""
    notes = dict(source.get("notes") or {})
    read_as = notes.pop("format", source.get("format"))
    counts = ", ".join(f"{k}: {v}" for k, v in sorted(notes.items()))
    model = source.get("model") or "none (Act, Prob and Ent missing)"
    return (
        f"<p>External generations: <code>{html.escape(str(source.get('file')))}</code> read as "
        f"{html.escape(str(read_as))}; scoring model {html.escape(str(model))}"
        + (f"; {html.escape(counts)}" if counts else "")
        + ".</p>"
    )


PROVENANCE_KEYS = (
    "run_id",
    "config",
    "config_hash",
    "seed",
    "models",
    "rewriter",
    "packages",
    "integrity",
    "external",
)


def provenance_of(manifest: dict[str, Any]) -> dict[str, Any]:
    """The parts of a manifest that describe how results were made (no per-run timings)."""
    return {key: manifest.get(key) for key in PROVENANCE_KEYS}
