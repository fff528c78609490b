"""The stability card of a release (``sago card <run> [--against <run>]``): one page, in the
spirit of a model card, written as ``card.md``, ``card.html`` and ``card.json``.

Per model of the run: its identity and provenance (manifest), pooled SGS per axis with its
95% interval and a verdict (``above tolerance`` when the Holm-adjusted p-value of the run's
reference test, eps 0.05 or the noise floor, is below 0.05, else ``not shown above
tolerance``), the tail figures (pooled, every family, from ``tails.parquet``), the three
worst instances (``instances.parquet``: the variants with the largest RMS of their
normalised deltas over the measured axes, the variant's own s), the axis-structure note
(``axis_structure.parquet``: which axis pairs are redundant, which axes carry their own
signal) and the peers' indices (``peer_metrics.parquet``: ProSA's PSS, POSIX, PDR,
MaxP/AvgP/CPS; docs/peer-metrics.md). A run written before those artifacts existed says so
in their place, except the peers' indices: a run without them has no peer block (the card's
JSON still says it predates them). With ``against``, the paired verdicts of this run (B)
against the earlier one (A), pooled rows (``statistics/paired_runs.py``; runs sampled
differently are refused unless allowed).

Sampling: the card states how the run decoded (greedy, or T, top_p, top_k and K
samples per prompt text) and, per model, how many sampled answers the engine record marks
not reproducible (an API provider that takes no seed). A temperature sweep's folder gets a
card of its own (``report/sweep/card.py``): per model, a row per temperature with each axis'
SGS (SGS-excess at T > 0) and prompt-induced share, read from ``sweep.parquet``.

Everything is read from the run folder: the card needs no model.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from sago_core.artifacts.layout import (
    AXIS_STRUCTURE_FILE,
    CARD_HTML_FILE,
    CARD_JSON_FILE,
    CARD_MD_FILE,
    GENERATIONS_FILE,
    INSTANCES_FILE,
    PEER_METRICS_FILE,
    SAMPLES_FILE,
    SUMMARY_FILE,
    TAILS_FILE,
    RunLayout,
)
from sago_core.artifacts.store import write_json, write_text
from sago_core.backends.model_source import RecordedModel
from sago_core.backends.served_identity import check_runs
from sago_core.peer_metrics.sources import PSS_BERT_TO_BASE, current_names
from sago_core.report.card.refusal import (
    refusal_against,
    refusal_blocks,
    refusal_card,
    refusal_paired_block,
)
from sago_core.report.card_budget import budget_blocks, budget_card
from sago_core.report.flip_words import AT_K, flip_headers, sampled_run
from sago_core.report.sections.language import language_blocks, language_card
from sago_core.scoring.encoder import axis_label, bert_label, encoder_of, label_of
from sago_core.scoring.verdict import tolerance_verdict
from sago_core.statistics.axis_structure import REDUNDANT_RHO
from sago_core.statistics.paired import ALPHA, DEFAULT_MARGIN
from sago_core.statistics.paired_runs import compare_paired, describe_sampling, sampling_settings
from sago_core.statistics.tails import ALL_FAMILIES
from sago_core.vocabulary import AXES, POOLED

CARD_VERSION = 1
WORST = 3
TAIL_COLUMNS = (
    "n",
    "q50",
    "q90",
    "q99",
    "max",
    "ci_low_q99",
    "ci_high_q99",
    "share_over_0_05",
    "flip_right_to_wrong",
    "flip_wrong_to_right",
    "ci_missing_reason",
)
INSTANCE_TEXTS = ("base_prompt", "variant_prompt", "base_answer", "variant_answer")
PAIRED_COLUMNS = (
    "axis",
    "n",
    "mean_diff",
    "ci_low",
    "ci_high",
    "ci_missing_reason",
    "mean_diff_datasets",
    "p_holm",
    "p_tost_holm",
)
PACKAGES = ("sago", "torch", "transformers", "vllm", "litellm")


# (heading, table headers, table rows, notes): one section of the card.
Block = tuple[str, list[str], list[list[str]], list[str]]


def _predates(name: str) -> str:
    return f"this run predates {name}: not available"


def _axis_order(frame: pl.DataFrame) -> pl.DataFrame:
    order = {axis: i for i, axis in enumerate(AXES)}
    return (
        frame.with_columns(
            pl.col("axis")
            .replace_strict(order, default=len(AXES), return_dtype=pl.Int32)
            .alias("_o")
        )
        .sort("_o")
        .drop("_o")
    )


def _pooled_sgs(summary: pl.DataFrame, model: str) -> list[dict[str, Any]]:
    rows = _axis_order(summary.filter((pl.col("model") == model) & (pl.col("dataset") == POOLED)))
    out = []
    for r in rows.iter_rows(named=True):
        p_holm = r.get("p_holm")
        out.append(
            {
                "axis": r["axis"],
                "sgs": r["sgs"],
                "ci_low": r.get("ci_low"),
                "ci_high": r.get("ci_high"),
                "ci_missing_reason": r.get("ci_missing_reason"),
                "n": r["n"],
                "reference": r.get("reference") or "eps 0.05",
                "p_reference": r.get("p_reference", r.get("p_eps_0_05")),
                "p_holm": p_holm,
                "verdict": tolerance_verdict(p_holm),
                "missing_reason": r.get("missing_reason"),
            }
        )
    return out


def _tails(run_dir: Path, model: str) -> dict[str, Any]:
    path = run_dir / TAILS_FILE
    if not path.is_file():
        return {"available": False, "note": _predates(TAILS_FILE), "rows": []}
    tails = pl.read_parquet(path).filter(
        (pl.col("model") == model)
        & (pl.col("dataset") == POOLED)
        & (pl.col("family") == ALL_FAMILIES)
    )
    keep = ["axis", *(c for c in TAIL_COLUMNS if c in tails.columns)]
    rows = _axis_order(tails.select(keep)).to_dicts()
    at_k = sampled_run(run_dir)  # K > 1: the flip columns are excesses (flip_words)
    return {"available": True, "note": AT_K if at_k else None, "rows": rows, "at_k": at_k}


def _worst(run_dir: Path, model: str) -> dict[str, Any]:
    path = run_dir / INSTANCES_FILE
    if not path.is_file():
        return {"available": False, "note": _predates(INSTANCES_FILE), "rows": []}
    instances = pl.read_parquet(path).filter(pl.col("model") == model)
    deltas = [f"d_{axis}" for axis in AXES if f"d_{axis}" in instances.columns]
    squares = pl.concat_list([pl.col(d).abs().pow(2) for d in deltas]).list.drop_nulls()
    ranked = instances.with_columns(squares.list.mean().sqrt().alias("variant_rms")).filter(
        pl.col("variant_rms").is_not_null()
    )
    worst = ranked.sort("variant_rms", descending=True, maintain_order=True).head(WORST)
    keep = ["dataset", "prompt_id", "variant_id", "family", "subtype", "strength", "position"]
    keep += [*INSTANCE_TEXTS, *deltas, "mr_intensity", "variant_rms"]
    rows = worst.select([c for c in keep if c in worst.columns]).to_dicts()
    return {"available": True, "note": None, "rows": rows}


def _axis_structure(run_dir: Path, model: str) -> dict[str, Any]:
    path = run_dir / AXIS_STRUCTURE_FILE
    if not path.is_file():
        return {"available": False, "note": _predates(AXIS_STRUCTURE_FILE)}
    pairs = pl.read_parquet(path).filter(pl.col("model") == model)
    redundant = pairs.filter(pl.col("redundant").fill_null(False))
    tied = set(redundant["axis_a"].to_list()) | set(redundant["axis_b"].to_list())
    measured = pairs.filter(pl.col("spearman_rho").is_not_null())
    present = set(measured["axis_a"].to_list()) | set(measured["axis_b"].to_list())
    return {
        "available": True,
        "note": f"redundant: |Spearman rho| > {REDUNDANT_RHO} with p < 0.05 over per-prompt s",
        "redundant_pairs": [
            {"axis_a": r["axis_a"], "axis_b": r["axis_b"], "spearman_rho": r["spearman_rho"]}
            for r in redundant.iter_rows(named=True)
        ],
        "own_signal": [axis for axis in AXES if axis in present - tied],
        "not_measured": [axis for axis in AXES if axis not in present],
    }


def _unreproducible(run_dir: Path) -> dict[str, tuple[int, int]]:
    """Per model: (sampled answers the engine record marks not reproducible, sampled
    answers), from samples.parquet at K > 1, else generations.parquet."""
    path = next(
        (p for p in (run_dir / SAMPLES_FILE, run_dir / GENERATIONS_FILE) if p.is_file()), None
    )
    if path is None:
        return {}
    if not {"model", "engine"} <= set(pl.read_parquet_schema(path)):
        return {}
    flags = (
        pl.read_parquet(path, columns=["model", "engine"])
        .select("model", pl.col("engine").str.json_path_match("$.sampling.reproducible").alias("r"))
        .filter(pl.col("r").is_not_null())
    )
    counts = flags.group_by("model").agg(
        (pl.col("r") == "false").sum().alias("no"), pl.len().alias("all")
    )
    return {m: (int(no), int(n)) for m, no, n in counts.iter_rows()}


def _paired(
    run_dir: Path,
    against: Path,
    margin: float,
    allow: bool,
    strict_identity: bool = False,
    allow_sampling: bool = False,
) -> dict[str, Any]:
    comparison = compare_paired(against, run_dir, margin, allow, strict_identity, allow_sampling)
    table = comparison.table
    pooled = _axis_order(table.filter(pl.col("dataset") == POOLED))
    per_dataset = table.filter(pl.col("dataset") != POOLED)
    rows = [
        {
            **{c: r[c] for c in PAIRED_COLUMNS},
            "model_a": r["model_a"],
            "model_b": r["model_b"],
            "verdict": r["verdict"],
        }
        for r in pooled.iter_rows(named=True)
    ]
    return {
        "against": str(against),
        "margin": margin,
        "config_differences": [d.describe() for d in comparison.differences],
        "decoding": {"a": comparison.sampling[0], "b": comparison.sampling[1]},
        "identity_warnings": comparison.identity.warnings,
        "rows": rows,
        "regressions": [r["axis"] for r in rows if r["verdict"] == "b_worse"],
        "dataset_regressions": per_dataset.filter(pl.col("verdict") == "b_worse").height,
        "dataset_rows": per_dataset.height,
    }


def build_card(
    run_dir: Path,
    against: Path | None = None,
    margin: float = DEFAULT_MARGIN,
    allow_different_configs: bool = False,
    against_note: str | None = None,
    strict_identity: bool = False,
    allow_different_sampling: bool = False,
) -> dict[str, Any]:
    """The card's content as plain JSON values. ``against_note`` says why there is no
    paired section when the caller could not make one. ``strict_identity``: refuse an
    ``against`` whose answers come from other served-model identities;
    ``allow_different_sampling``: compare with an ``against`` sampled differently."""
    layout = RunLayout(run_dir)
    manifest = json.loads(layout.manifest.read_text(encoding="utf-8"))
    summary = pl.read_parquet(run_dir / SUMMARY_FILE)
    config = manifest.get("config") or {}
    packages = manifest.get("packages") or {}
    drift = check_runs([("this run", run_dir)]).drift
    unreproducible = _unreproducible(run_dir)
    models = []
    for spec in sorted(summary["model"].unique().to_list()):
        identity = (manifest.get("models") or {}).get(spec) or {}
        models.append(
            {
                "spec": spec,
                "identity": identity.get("identity"),
                "kind": identity.get("kind"),
                "location": identity.get("location"),
                "pooled_sgs": _pooled_sgs(summary, spec),
                "tails": _tails(run_dir, spec),
                "languages": language_card(run_dir, spec),
                "worst_instances": _worst(run_dir, spec),
                "axis_structure": _axis_structure(run_dir, spec),
                "peer_indices": _peer_indices(run_dir, spec),
                "identity_drift": [line for line in drift if line.startswith(f"this run: {spec}:")],
                "unreproducible": unreproducible.get(spec),
                **refusal_card(run_dir, spec),
            }
        )
    paired = (
        _paired(
            run_dir,
            against,
            margin,
            allow_different_configs,
            strict_identity,
            allow_different_sampling,
        )
        if against
        else None
    )
    return {
        "card_version": CARD_VERSION,
        "run_id": manifest.get("run_id") or run_dir.name,
        "run_dir": str(run_dir),
        "written_at": manifest.get("written_at"),
        "config_hash": manifest.get("config_hash"),
        "preset": config.get("preset"),
        "datasets": config.get("datasets"),
        "n": config.get("n"),
        "seed": manifest.get("seed"),
        "decoding": sampling_settings(config),
        "bert_encoder": label_of(encoder_of(config)),
        "packages": {k: packages[k] for k in PACKAGES if k in packages},
        "models": models,
        "paired": paired,
        "paired_note": against_note if paired is None else None,
        **refusal_against(run_dir, against, paired),
        **budget_card(run_dir),
    }


def _num(value: Any) -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return "NA"
    if isinstance(value, float):
        return f"{value:.3g}" if value != 0 and abs(value) < 1e-3 else f"{value:.4f}"
    return str(value)


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


def _peer_indices(run_dir: Path, model: str) -> dict[str, Any]:
    """The peers' indices, datasets pooled, every family (peer_metrics.parquet)."""
    path = run_dir / PEER_METRICS_FILE
    if not path.is_file():
        return {"available": False, "note": f"this run predates {PEER_METRICS_FILE}", "rows": []}
    rows = current_names(pl.read_parquet(path)).filter(
        (pl.col("model") == model)
        & (pl.col("dataset") == POOLED)
        & (pl.col("family") == ALL_FAMILIES)
    )
    keep = ["index", "value", "n", "source", "coverage", "missing_reason"]
    return {"available": True, "note": None, "rows": rows.select(keep).to_dicts()}


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
            lines += ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
            lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
            lines.append("")
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
            head = "".join(f"<th>{esc(h)}</th>" for h in headers)
            body = "".join(
                "<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in rows
            )
            parts.append(f"<table><tr>{head}</tr>{body}</table>")
        if notes:
            parts.append("<ul>" + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul>")
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>Stability card {esc(str(card['run_id']))}</title><style>{STYLE}</style>"
        f"</head><body>{''.join(parts)}</body></html>"
    )


def write_card(
    run_dir: Path,
    against: Path | None = None,
    margin: float = DEFAULT_MARGIN,
    allow_different_configs: bool = False,
    against_note: str | None = None,
    strict_identity: bool = False,
    allow_different_sampling: bool = False,
) -> list[Path]:
    """card.md, card.html and card.json in the run folder (each written atomically)."""
    card = build_card(
        run_dir,
        against,
        margin,
        allow_different_configs,
        against_note,
        strict_identity,
        allow_different_sampling,
    )
    return write_card_files(card, run_dir)


def write_card_files(
    card: dict[str, Any], folder: Path, blocks: list[Block] | None = None
) -> list[Path]:
    """card.md, card.html (``blocks``, or the card's own sections) and card.json."""
    return [
        write_text(render_card_md(card, blocks), folder / CARD_MD_FILE),
        write_text(render_card_html(card, blocks), folder / CARD_HTML_FILE),
        write_json(card, folder / CARD_JSON_FILE),
    ]
