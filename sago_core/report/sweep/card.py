"""The card of a temperature sweep, written in the sweep's folder by
``sago run`` when the sweep finishes: per model, one row per temperature with each axis'
SGS (SGS-excess at T > 0) and, in a second table, the prompt-induced share, every variant
family and datasets pooled, read from ``sweep.parquet`` (``report/sweep/page.py``). It renders
through the stability card's Markdown and HTML (``report/card/build.py``), with blocks of its own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from sago_core.artifacts.layout import SWEEP_FILE, RunLayout
from sago_core.report.card.build import CARD_VERSION, write_card_files
from sago_core.report.card.render import Block, axis_order, format_interval, format_number
from sago_core.statistics.tails import ALL_FAMILIES

SWEEP_CARD_KIND = "sweep"  # card.json's "kind"

# A cell's value, interval, the value's reason and the interval's reason (``_cell``).
SGS_KEYS = ("sgs", "ci_low", "ci_high", "missing_reason", "ci_missing_reason")
SHARE_KEYS = tuple(
    f"prompt_share{part}"
    for part in ("", "_ci_low", "_ci_high", "_missing_reason", "_ci_missing_reason")
)


def is_sweep_folder(folder: Path) -> bool:
    """A temperature sweep's folder (its table written), not a run's."""
    return (folder / SWEEP_FILE).is_file()


def build_sweep_card(sweep_dir: Path) -> dict[str, Any]:
    """A sweep's card: per model, one row per temperature (every family, datasets pooled)
    with each axis' SGS or SGS-excess and prompt-induced share (``sweep.parquet``)."""
    config = json.loads(RunLayout(sweep_dir).run_config.read_text(encoding="utf-8"))
    frame = pl.read_parquet(sweep_dir / SWEEP_FILE).filter(pl.col("family") == ALL_FAMILIES)
    models = []
    for model in sorted(frame["model"].unique().to_list()):
        rows = frame.filter(pl.col("model") == model).sort("temperature")
        arms = []
        for t in rows["temperature"].unique(maintain_order=True).to_list():
            at = axis_order(rows.filter(pl.col("temperature") == t))
            first = at.row(0, named=True)
            arms.append(
                {
                    "temperature": t,
                    "samples": first["samples"],
                    "run_id": first["run_id"],
                    "measure": first["measure"],
                    "axes": {
                        r["axis"]: {c: r[c] for c in (*SGS_KEYS, *SHARE_KEYS)}
                        for r in at.iter_rows(named=True)
                    },
                }
            )
        models.append({"spec": model, "arms": arms})
    generation = config.get("generation") or {}
    return {
        "card_version": CARD_VERSION,
        "kind": SWEEP_CARD_KIND,
        "run_id": sweep_dir.name,
        "run_dir": str(sweep_dir),
        **{key: config.get(key) for key in ("preset", "datasets", "n")},
        "temperatures": generation.get("temperatures"),
        "samples": generation.get("samples"),
        "models": models,
    }


Reasons = dict[str, list[str]]  # why a cell is NA or has no interval -> the axes it holds for


def _cell(cells: dict[str, Any], axis: str, keys: tuple[str, ...], why: Reasons) -> str:
    """ "value [low, high]", "value (no CI)" or "NA" (``keys``: value, low, high, the value's
    reason, the interval's reason); the reason of each of the latter two is gathered in
    ``why``, said once below the table rather than in every cell."""
    value, low, high, value_reason, ci_reason = (cells.get(k) for k in keys)
    if value is None:
        why.setdefault(f"NA: {value_reason or 'not measured'}", []).append(axis)
        return "NA"
    if low is None or high is None:
        why.setdefault(f"no CI: {ci_reason or 'not drawn'}", []).append(axis)
        return f"{format_number(value)} (no CI)"
    return f"{format_number(value)} {format_interval(cells, keys[1], keys[2])}"


def _reason_notes(label: str, why: Reasons, axes: list[str]) -> list[str]:
    return [
        f"{label}, {'every axis' if sorted(on) == sorted(axes) else ', '.join(on)}: {reason}"
        for reason, on in why.items()
    ]


def sweep_blocks(card: dict[str, Any]) -> list[Block]:
    """Per model: the SGS / SGS-excess table and the share table, a row per temperature."""
    blocks: list[Block] = []
    for model in card["models"]:
        axes = list(dict.fromkeys(a for arm in model["arms"] for a in arm["axes"]))
        sgs_rows, share_rows, sgs_notes, share_notes = [], [], [], []
        for arm in model["arms"]:
            lead = [f"{arm['temperature']:g}", str(arm["samples"])]
            label = f"T {arm['temperature']:g}"
            sgs_why: Reasons = {}
            share_why: Reasons = {}
            cells = {a: arm["axes"].get(a) or {} for a in axes}
            sgs_rows.append(
                [
                    *lead,
                    arm["measure"],
                    *(_cell(cells[a], a, SGS_KEYS, sgs_why) for a in axes),
                    arm["run_id"],
                ]
            )
            share_rows.append([*lead, *(_cell(cells[a], a, SHARE_KEYS, share_why) for a in axes)])
            sgs_notes += _reason_notes(label, sgs_why, axes)
            share_notes += _reason_notes(label, share_why, axes)
        notes = [
            f"sweep {card['run_id']}: preset {card['preset']}, datasets {card['datasets']}, "
            f"n {card['n']}; each temperature is its own run (its card: sago card <run>)",
            "sgs_excess (T > 0, K > 1): the score of the prompt-induced excesses beyond "
            "resampling noise; sgs: the paper's score (T = 0, or one sample); every family, "
            "datasets pooled, 95% CI over prompts",
            *sgs_notes,
        ]
        blocks.append(
            (
                f"Temperature sweep: {model['spec']}",
                ["T", "K", "measure", *axes, "run"],
                sgs_rows,
                notes,
            )
        )
        blocks.append(
            (
                f"Prompt-induced share: {model['spec']}",
                ["T", "K", *axes],
                share_rows,
                ["s2_variant / (s2_variant + s2_sample), 95% CI over prompts", *share_notes],
            )
        )
    return blocks


def write_sweep_card(sweep_dir: Path) -> list[Path]:
    """card.md, card.html and card.json in the sweep's folder."""
    card = build_sweep_card(sweep_dir)
    return write_card_files(card, sweep_dir, sweep_blocks(card))
