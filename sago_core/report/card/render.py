"""The stability card's words and pages: one block (heading, table, notes) per part of
``build.py``'s card, and the same blocks as card.md and as a self-contained card.html."""

from __future__ import annotations

import html
from typing import Any

import polars as pl

from sago_core.backends.model_source import RecordedModel
from sago_core.config.saved import describe_sampling
from sago_core.markdown import table
from sago_core.peer_metrics.sources import PSS_BERT_TO_BASE
from sago_core.report.card.budget import budget_blocks
from sago_core.report.card.refusal import (
    refusal_blocks,
    refusal_paired_block,
)
from sago_core.report.flip_words import flip_headers
from sago_core.report.markup import axis_rank, plain_table
from sago_core.report.markup import number as _num
from sago_core.report.sections.language import language_blocks
from sago_core.scoring.encoder import axis_label, bert_label
from sago_core.statistics.paired import ALPHA
from sago_core.vocabulary import AXES

# (heading, table headers, table rows, notes): one section of the card.
Block = tuple[str, list[str], list[list[str]], list[str]]


def _axis_order(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.with_columns(axis_rank().alias("_o")).sort("_o").drop("_o")


def _ci(row: dict[str, Any], low: str = "ci_low", high: str = "ci_high") -> str:
    """ "[low, high]", or NA with the row's reason (too few prompts) when there is none."""
    if row.get(low) is None or row.get(high) is None:
        reason = row.get("ci_missing_reason")
        return f"NA ({reason})" if reason else "NA"
    return f"[{_num(row[low])}, {_num(row[high])}]"


# The card's formatting, shared with a sweep's card (``report/sweep/card.py``).
format_number, format_interval, axis_order = _num, _ci, _axis_order


def _short(text: Any, limit: int = 160) -> str:
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _sections(card: dict[str, Any]) -> list[Block]:
    """(heading, table headers, table rows, notes) blocks shared by the Markdown and HTML."""
    blocks: list[Block] = [*budget_blocks(card)]
    for model in card["models"]:
        peer = model.get("peer_indices") or {}
        blocks += [
            _identity_block(card, model),
            _sgs_block(model, card.get("bert_encoder")),
            *([_peer_block(model, card.get("bert_encoder"))] if peer.get("available") else []),
            _tails_block(model),
            *language_blocks(model.get("languages") or {}),
            _worst_block(model),
            _structure_block(model),
            *refusal_blocks(model),
        ]
    return [*blocks, _paired_block(card), *refusal_paired_block(card)]


def _identity_block(card: dict[str, Any], model: dict[str, Any]) -> Block:
    name = model["spec"]
    if model["identity"] is None and RecordedModel.of(name).spec is None:
        # answers scored from a file (`sago score`): no weights here, only the file's name
        identity = [f"identity: {name}, known by its name only (answers made elsewhere)"]
    else:
        identity = [
            f"identity: {model['identity']}",
            f"weights: {model['kind']} at {model['location']}",
        ]
    identity += [
        f"run: {card['run_id']} (config {str(card['config_hash'])[:12]}, preset "
        f"{card['preset']}, datasets {card['datasets']}, n {card['n']}, seed {card['seed']})",
        f"written: {card['written_at']}; packages: "
        + ", ".join(f"{k} {v}" for k, v in card["packages"].items()),
    ]
    identity.append(f"decoding: {describe_sampling(card.get('decoding') or {})}")
    identity += [f"WARNING: {line}" for line in model.get("identity_drift", [])]
    unreproducible = model.get("unreproducible")
    if unreproducible and unreproducible[0]:
        identity.append(
            f"WARNING: {unreproducible[0]} of {unreproducible[1]} sampled answers are not "
            "reproducible (the provider takes no seed; engine record): a rerun draws other "
            "samples"
        )
    return (f"Model {name}", [], [], identity)


def _sgs_block(model: dict[str, Any], encoder: str | None = None) -> Block:
    sgs_rows = [
        [
            axis_label(r["axis"], encoder),
            _num(r["sgs"]),
            _ci(r),
            str(r["n"]),
            _num(r["p_reference"]),
            _num(r["p_holm"]),
            r["verdict"] or (r["missing_reason"] or "NA"),
        ]
        for r in model["pooled_sgs"]
    ]
    reference = model["pooled_sgs"][0]["reference"] if model["pooled_sgs"] else "eps 0.05"
    return (
        "Pooled SGS per axis",
        ["axis", "SGS", "95% CI", "n", f"p ({reference})", "Holm", "verdict"],
        sgs_rows,
        [f"verdict: Holm-adjusted p below {ALPHA} means instability above the tolerance"],
    )


def _peer_block(model: dict[str, Any], encoder: str | None = None) -> Block:
    peer = model.get("peer_indices") or {"available": False, "note": None, "rows": []}
    rows = [
        [
            bert_label(r["index"], encoder) if r["index"] == PSS_BERT_TO_BASE else r["index"],
            _num(r["value"]),
            str(r["n"]),
            r["source"],
            r["missing_reason"] or r["coverage"] or "",
        ]
        for r in peer["rows"]
    ]
    notes = [peer["note"]] if peer["note"] else []
    notes.append("sago's base prompt and its variants are the peer's prompt templates")
    headers = ["index", "value", "n", "source", "note"] if rows else []
    return ("Peer indices (datasets pooled)", headers, rows, notes)


def _tails_block(model: dict[str, Any]) -> Block:
    tails = model["tails"]
    tail_rows = [
        [
            r["axis"],
            *(_num(r.get(c)) for c in ("q50", "q90", "q99", "max")),
            _ci(r, "ci_low_q99", "ci_high_q99"),
            _num(r.get("share_over_0_05")),
            _num(r.get("flip_right_to_wrong")),
            _num(r.get("flip_wrong_to_right")),
        ]
        for r in tails["rows"]
    ]
    return (
        "Tails of |delta_norm| (pooled, every family)",
        [
            "axis",
            "q50",
            "q90",
            "q99",
            "max",
            "q99 95% CI",
            "share > 0.05",
            *flip_headers(bool(tails.get("at_k"))),
        ]
        if tails["available"]
        else [],
        tail_rows,
        [tails["note"]] if tails["note"] else [],
    )


def _worst_block(model: dict[str, Any]) -> Block:
    worst = model["worst_instances"]
    worst_notes = [worst["note"]] if worst["note"] else []
    for i, r in enumerate(worst["rows"], 1):
        deltas = ", ".join(
            f"{axis} {_num(r.get(f'd_{axis}'))}" for axis in AXES if f"d_{axis}" in r
        )
        worst_notes.append(
            f"#{i} {r['dataset']}/{r['prompt_id']} {r['variant_id']} (RMS "
            f"{_num(r['variant_rms'])}; {deltas}; mr_intensity {_num(r.get('mr_intensity'))})"
            f" — prompt: “{_short(r.get('base_prompt'))}” → variant: "
            f"“{_short(r.get('variant_prompt'))}”; base answer: "
            f"“{_short(r.get('base_answer'))}”; variant answer: "
            f"“{_short(r.get('variant_answer'))}”"
        )
    return ("Worst three instances", [], [], worst_notes)


def _structure_block(model: dict[str, Any]) -> Block:
    structure = model["axis_structure"]
    if structure["available"]:
        pairs = (
            ", ".join(
                f"{p['axis_a']}~{p['axis_b']} (rho {_num(p['spearman_rho'])})"
                for p in structure["redundant_pairs"]
            )
            or "none"
        )
        notes = [
            f"redundant pairs: {pairs}",
            f"own signal: {', '.join(structure['own_signal']) or 'none'}",
            structure["note"],
        ]
        if structure["not_measured"]:
            notes.append(f"not measured: {', '.join(structure['not_measured'])}")
    else:
        notes = [structure["note"]]
    return ("Axis structure", [], [], notes)


def _paired_block(card: dict[str, Any]) -> Block:
    paired = card["paired"]
    if paired is None:
        note = card.get("paired_note") or "no earlier release given (--against)"
        return ("Against the previous release", [], [], [note])
    else:
        rows = [
            [
                r["axis"],
                str(r["n"]),
                _num(r["mean_diff"]),
                _ci(r),
                _num(r.get("mean_diff_datasets")),
                _num(r["p_holm"]),
                _num(r["p_tost_holm"]),
                r["verdict"] or "NA",
            ]
            for r in paired["rows"]
        ]
        notes = [
            *(f"WARNING: {w}" for w in paired.get("identity_warnings", [])),
            f"A = {_against_models(paired)} ({paired['against']}); B = this run; differences "
            "B minus A on s (above 0: B "
            f"less stable); equivalence margin {paired['margin']} SGS units; the mean diff "
            "and its 95% CI are over every shared prompt, as the tests and verdict use them; "
            "the dataset-weighted mean (equal weight per dataset) is shown for reference",
            "regressions (pooled): "
            + (", ".join(paired["regressions"]) or "none")
            + f"; per-dataset rows b_worse: {paired['dataset_regressions']} of "
            f"{paired['dataset_rows']}",
            *(f"config differs (allowed): {d}" for d in paired["config_differences"]),
            *(
                [
                    f"decoding: A {describe_sampling(paired['decoding']['a'])}; B "
                    f"{describe_sampling(paired['decoding']['b'])}"
                ]
                if paired.get("decoding")
                else []
            ),
        ]
        return (
            "Against the previous release",
            [
                "axis",
                "n",
                "mean diff (all prompts, tested)",
                "95% CI",
                "dataset-weighted mean",
                "Holm (t)",
                "Holm (TOST)",
                "verdict",
            ],
            rows,
            notes,
        )


def _against_models(paired: dict[str, Any]) -> str:
    return ", ".join(sorted({r["model_a"] for r in paired["rows"]})) or "no shared model"


def render_card_md(card: dict[str, Any], blocks: list[Block] | None = None) -> str:
    """The card as Markdown: ``blocks``, or the card's own sections."""
    lines = [f"# Stability card: {card['run_id']}", ""]
    for heading, headers, rows, notes in _sections(card) if blocks is None else blocks:
        lines += [f"## {heading}", ""]
        if headers:
            lines += [*table(headers, rows), ""]
        lines += [f"- {n}" for n in notes] + ([""] if notes else [])
    return "\n".join(lines)


STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:960px;color:#222}"
    "table{border-collapse:collapse;margin:0.5rem 0 1rem}th,td{border:1px solid #ccc;"
    "padding:0.2rem 0.5rem;font-size:0.9rem;text-align:right}th{background:#f3f3f3}"
    "td:first-child,th:first-child{text-align:left}li{margin:0.2rem 0}"
)


def render_card_html(card: dict[str, Any], blocks: list[Block] | None = None) -> str:
    """One self-contained page (no scripts, no external resources): ``blocks``, or the
    card's own sections."""
    esc = html.escape
    parts = [f"<h1>Stability card: {esc(str(card['run_id']))}</h1>"]
    for heading, headers, rows, notes in _sections(card) if blocks is None else blocks:
        parts.append(f"<h2>{esc(heading)}</h2>")
        if headers:
            parts.append(plain_table(headers, [[esc(c) for c in r] for r in rows]))
        if notes:
            parts.append("<ul>" + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul>")
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>Stability card {esc(str(card['run_id']))}</title><style>{STYLE}</style>"
        f"</head><body>{''.join(parts)}</body></html>"
    )
