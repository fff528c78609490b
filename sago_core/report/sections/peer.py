"""The report's "peer indices beside SGS" section, from peer_metrics.parquet alone: ProSA's
PSS, POSIX, PromptBench's PDR and MaxP/AvgP/CPS of "State of What Art?", pooled over
datasets, for every family together and per family; NA cells name their reason."""

from __future__ import annotations

import html
from pathlib import Path

import polars as pl

from sago_core.artifacts.layout import PEER_METRICS_FILE
from sago_core.peer_metrics.sources import (
    AVG_P,
    COVERAGE,
    CPS,
    INDICES,
    MAX_P,
    PDR,
    POSIX,
    POSIX_BASE_COLUMN,
    PSS_BERT_TO_BASE,
    PSS_CORRECT,
    SOURCES,
    current_names,
)
from sago_core.report.markup import NA, na
from sago_core.report.markup import table as _table
from sago_core.scoring.encoder import bert_label
from sago_core.statistics.tails import ALL_FAMILIES
from sago_core.vocabulary import POOLED

LABELS = {
    PSS_CORRECT: "PSS (correct)",
    PSS_BERT_TO_BASE: "PSS form, BERT to base",
    POSIX: "POSIX",
    POSIX_BASE_COLUMN: "POSIX form, base column",
    PDR: "PDR",
    MAX_P: "MaxP",
    AVG_P: "AvgP",
    CPS: "CPS",
}
BESIDE = {PSS_BERT_TO_BASE: "bert", POSIX: "prob"}  # the SGS axis each is shown beside


def peer_metrics_from_run(run_dir: Path) -> pl.DataFrame | None:
    path = run_dir / PEER_METRICS_FILE
    return pl.read_parquet(path) if path.exists() else None


def _value(row: dict | None) -> str:
    if row is None or row["value"] is None:
        return na(None if row is None else row["missing_reason"])
    return f"{row['value']:.4f}"


def _sgs(summary: pl.DataFrame, model: str, axis: str) -> str:
    rows = summary.filter(model=model, dataset=POOLED, axis=axis)
    if rows.height == 0 or rows["sgs"][0] is None:
        return NA
    return f"{rows['sgs'][0]:.4f}"


def _row_cells(index: dict[tuple[str, str], dict], family: str) -> list[str]:
    return [_value(index.get((family, name))) for name in INDICES]


def _notes(pooled: pl.DataFrame) -> str:
    missing = (
        pooled.filter(pl.col("value").is_null())
        .group_by("index", "missing_reason")
        .agg(pl.len())
        .sort("index", "missing_reason")
    )
    items = [
        f"<li>{html.escape(LABELS[name])}: {html.escape(SOURCES[name])}"
        + (f"; {html.escape(coverage)}" if (coverage := COVERAGE[name]) else "")
        + "</li>"
        for name in INDICES
    ]
    na = [
        f"<li>{html.escape(LABELS.get(r['index'], r['index']))} NA in {r['len']} row(s): "
        f"{html.escape(r['missing_reason'] or '')}</li>"
        for r in missing.iter_rows(named=True)
    ]
    return (
        "<p>Sources and what sago computes (docs/peer-metrics.md):</p><ul>"
        + "".join(items)
        + "</ul>"
        + (f"<p>Not computable:</p><ul>{''.join(na)}</ul>" if na else "")
    )


def peer_section(peer: pl.DataFrame, summary: pl.DataFrame, encoder: str | None = None) -> str:
    """``encoder``: the BERTScore encoder's label, named beside the BERT columns."""
    pooled = current_names(peer).filter(pl.col("dataset") == POOLED)
    models = sorted(pooled["model"].unique().to_list())
    overall, by_family = [], []
    for model in models:
        rows = pooled.filter(pl.col("model") == model)
        index = {(r["family"], r["index"]): r for r in rows.iter_rows(named=True)}
        cells = _row_cells(index, ALL_FAMILIES)
        sgs = {name: _sgs(summary, model, axis) for name, axis in BESIDE.items()}
        pss_cells = [cells[0], cells[1], sgs[PSS_BERT_TO_BASE]]
        overall.append([html.escape(model), *pss_cells, cells[2], sgs[POSIX], *cells[3:]])
        families = sorted(f for f in rows["family"].unique().to_list() if f != ALL_FAMILIES)
        by_family += [
            [html.escape(model), html.escape(family), *_row_cells(index, family)]
            for family in families
        ]
    labels = [LABELS[name] for name in INDICES]
    labels[1] = bert_label(labels[1], encoder)
    sgs_bert = bert_label("SGS bert", encoder)
    headers = ["model", labels[0], labels[1], sgs_bert, labels[2], "SGS prob", *labels[3:]]
    return (
        "<p>The prompt-sensitivity indices other papers report, from this run's own answers, "
        "verdicts and teacher-forced log-probabilities (datasets pooled). The sago base "
        "prompt and its variants are the peer's prompt templates of one instance. Higher PSS, "
        "POSIX and PDR mean more sensitive; MaxP, AvgP and CPS are accuracies.</p>"
        + _table(headers, overall, left=1)
        + "<p>Per variant family (the base prompt and that family's variants):</p>"
        + _table(["model", "family", *labels], by_family, left=2)
        + _notes(pooled)
    )


def peer_sections(
    peer: pl.DataFrame | None, summary: pl.DataFrame, encoder: str | None = None
) -> list[str]:
    """Placed right after the pooled SGS table; nothing when the run has no peer indices."""
    if peer is None or peer.height == 0:
        return []
    return ["<h2>Peer indices beside SGS</h2>", peer_section(peer, summary, encoder)]
