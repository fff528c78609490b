"""The stability card's refusal rows: per model, breach and over-refusal per kind and family
(refusal_rates.parquet) and the Best-of-N summary (best_of_n_summary.parquet); with an
earlier release (``--against``) whose run measured refusal too, the refusal rows of the
paired comparison (``refusal/paired.py``: failure rate, and Best-of-N at the family's N,
B against A, TOST, Holm, verdict).

A run whose prompts carry no kind has none of these files: its card holds no refusal key
at all, so its card.json is what it was.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from sago_core.artifacts.layout import BEST_OF_N_SUMMARY_FILE, REFUSAL_RATES_FILE
from sago_core.refusal.flips import split_rates, split_row
from sago_core.refusal.paired import BEST_OF_N_MEASURE, refusal_paired_runs
from sago_core.stages.refusal import FAMILY_LEVEL

Block = tuple[str, list[str], list[list[str]], list[str]]  # report/card/build.py's block
RATE_COLUMNS = (
    "kind",
    "family",
    "failure",
    "n_prompts",
    "breach_rate",
    "breach_low",
    "breach_high",
    "over_refusal_rate",
    "over_refusal_low",
    "over_refusal_high",
    "refused_after_rewording_rate",
    "refused_after_rewording_low",
    "refused_after_rewording_high",
    "answered_after_rewording_rate",
    "answered_after_rewording_low",
    "answered_after_rewording_high",
    "interval_missing_reason",
)
BEST_OF_N_COLUMNS = ("family", "n_prompts", "base_complied", "half_n", "half_missing_reason")


def refusal_card(run_dir: Path, model: str) -> dict[str, Any]:
    """``{"refusal": {...}}`` for the card's model entry, or ``{}`` when the run did not
    measure refusal."""
    rates_path, best_path = run_dir / REFUSAL_RATES_FILE, run_dir / BEST_OF_N_SUMMARY_FILE
    if not rates_path.is_file():
        return {}
    rates = split_rates(pl.read_parquet(rates_path)).filter(model=model, level=FAMILY_LEVEL)
    best = pl.read_parquet(best_path).filter(pl.col("model") == model)
    return {
        "refusal": {
            "rates": rates.select(RATE_COLUMNS).to_dicts(),
            "best_of_n": best.select(BEST_OF_N_COLUMNS).to_dicts(),
        }
    }


def refusal_against(
    run_dir: Path, against: Path | None, paired: dict[str, Any] | None
) -> dict[str, Any]:
    """``{"refusal_paired": [...]}`` (refusal/paired.py's rows, B = this run) when the
    card compares with an earlier release and both runs measured refusal; else ``{}``."""
    if against is None or paired is None:
        return {}
    pairs = sorted({(r["model_a"], r["model_b"]) for r in paired["rows"]})
    table = refusal_paired_runs(against, run_dir, pairs)
    return {} if table is None else {"refusal_paired": table.to_dicts()}


def _number(value: Any) -> str:
    return "NA" if value is None else f"{value:.3f}"


def _rate(row: dict[str, Any], direction: str) -> str:
    value, low, high = (row[f"{direction}_{s}"] for s in ("rate", "low", "high"))
    if value is None:
        return "NA"
    band = f"[{low:.2f}, {high:.2f}]" if low is not None and high is not None else "(no CI)"
    return f"{value:.2f} {band}"


def refusal_blocks(model: dict[str, Any]) -> list[Block]:
    """The model's refusal block (none when the run did not measure refusal)."""
    refusal = model.get("refusal")
    if not refusal:
        return []
    rows = [
        [
            r["kind"],
            r["family"],
            r["failure"],
            str(r["n_prompts"]),
            _rate(r, "breach"),
            _rate(r, "over_refusal"),
            _rate(r, "refused_after_rewording"),
            _rate(r, "answered_after_rewording"),
        ]
        for r in map(split_row, refusal["rates"])  # a card from before the split too
    ]
    notes = [
        "breach: a harmful prompt's base refused, the variant answered; over-refusal: a "
        "harmless prompt's base answered, the variant refused; refused after rewording: the "
        "same on a harmful prompt; answered after rewording: a breach's flip on a harmless "
        "prompt; the failure is a breach for harmful prompts, an "
        "over-refusal for harmless ones; rates "
        "over prompts with 95% bootstrap intervals (none under 5 prompts); replay is the floor"
    ]
    for b in refusal["best_of_n"]:
        half = b["half_n"] if b["half_n"] is not None else f"NA ({b['half_missing_reason']})"
        notes.append(
            f"Best-of-N, {b['family']}: half the harmful prompts breached at N = {half} "
            f"({b['n_prompts']} prompts with a refused base; {b['base_complied']} answered "
            "at the base)"
        )
    headers = ["kind", "family", "failure", "prompts", "breach [95% CI]", "over-refusal"]
    headers += ["refused after rewording", "answered after rewording"]
    return [("Refusal consistency", headers, rows, notes)]


def _family(row: dict[str, Any]) -> str:
    """The row's family, and for a Best-of-N row its N (a card from before them has none)."""
    if row.get("measure") == BEST_OF_N_MEASURE:
        return f"{row['family']} (Best-of-N, N = {row['n_variants'] or 'NA'})"
    return str(row["family"])


def refusal_paired_block(card: dict[str, Any]) -> list[Block]:
    """The refusal rows against the earlier release (none without them)."""
    table = card.get("refusal_paired")
    if not table:
        return []
    rows = [
        [
            f"{r['model_b']} vs {r['model_a']}",
            r["kind"],
            _family(r),
            r["failure"],
            str(r["n"]),
            _number(r["mean_diff"]),
            _number(r["p_tost_holm"]),
            r["verdict"] or f"NA ({r['missing_reason']})",
        ]
        for r in table
    ]
    notes = [
        "failure rate B (this run) minus A (the earlier release) on shared prompts; a "
        "Best-of-N row: P(at least one of N variants fails), N the family's smallest shared "
        f"variant count; equivalence margin {table[0]['margin']} in rate units; Holm over "
        "these rows"
    ]
    headers = ["models", "kind", "family", "failure", "n", "B - A", "Holm (TOST)", "verdict"]
    return [("Refusal against the previous release", headers, rows, notes)]
