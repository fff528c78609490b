"""The stability card of a release (``sago card <run> [--against <run>]``): one page, in the
spirit of a model card, written as ``card.md``, ``card.html`` and ``card.json``.

docs/tutorials/compare-releases.md says what it holds per model: identity and provenance,
pooled SGS with its verdict (``scoring/verdict.py``), tails, the three worst instances
(ranked as the report ranks them, ``variant_rms``), the axis structure, the peers' indices,
how the run decoded and how many sampled answers are not reproducible, and with
``against`` the pooled paired verdicts (``statistics/paired_runs.py``). A run written before
an artifact existed says so in its place, except the peers' indices: a run without them has
no peer block (the card's JSON still says it predates them). A temperature sweep's folder
gets a card of its own (``report/sweep/card.py``). Everything is read from the run folder:
the card needs no model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
from sago_core.backends.served_identity import check_runs
from sago_core.config.saved import sampling_settings
from sago_core.peer_metrics.sources import current_names
from sago_core.report.card.budget import budget_card
from sago_core.report.card.refusal import (
    refusal_against,
    refusal_card,
)
from sago_core.report.card.render import (
    Block,
    _axis_order,
    render_card_html,
    render_card_md,
)
from sago_core.report.flip_words import AT_K, sampled_run
from sago_core.report.page.headline import variant_rms
from sago_core.report.sections.language import language_card
from sago_core.scoring.encoder import encoder_of, label_of
from sago_core.scoring.verdict import tolerance_verdict
from sago_core.statistics.axis_structure import REDUNDANT_RHO
from sago_core.statistics.paired import DEFAULT_MARGIN
from sago_core.statistics.paired_runs import compare_paired
from sago_core.statistics.tails import ALL_FAMILIES
from sago_core.vocabulary import AXES, POOLED, VARIANT_COLUMNS

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


def _predates(name: str) -> str:
    return f"this run predates {name}: not available"


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
    tails = pl.read_parquet(path).filter(model=model, dataset=POOLED, family=ALL_FAMILIES)
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
    ranked = instances.with_columns(variant_rms(deltas).alias("variant_rms")).filter(
        pl.col("variant_rms").is_not_null()
    )
    worst = ranked.sort("variant_rms", descending=True, maintain_order=True).head(WORST)
    keep = ["dataset", "prompt_id", "variant_id", *VARIANT_COLUMNS]
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
    paired = None
    if against:
        allow = allow_different_configs, strict_identity, allow_different_sampling
        paired = _paired(run_dir, against, margin, *allow)
    return {
        "card_version": CARD_VERSION,
        "run_id": manifest.get("run_id") or run_dir.name,
        "run_dir": str(run_dir),
        "written_at": manifest.get("written_at"),
        "config_hash": manifest.get("config_hash"),
        **{key: config.get(key) for key in ("preset", "datasets", "n")},
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


def _peer_indices(run_dir: Path, model: str) -> dict[str, Any]:
    """The peers' indices, datasets pooled, every family (peer_metrics.parquet)."""
    path = run_dir / PEER_METRICS_FILE
    if not path.is_file():
        return {"available": False, "note": f"this run predates {PEER_METRICS_FILE}", "rows": []}
    rows = current_names(pl.read_parquet(path)).filter(
        model=model, dataset=POOLED, family=ALL_FAMILIES
    )
    keep = ["index", "value", "n", "source", "coverage", "missing_reason"]
    return {"available": True, "note": None, "rows": rows.select(keep).to_dicts()}


def write_card(run_dir: Path, against: Path | None = None, **options: Any) -> list[Path]:
    """card.md, card.html and card.json in the run folder (each written atomically);
    ``options``: ``build_card``'s."""
    return write_card_files(build_card(run_dir, against, **options), run_dir)


def write_card_files(
    card: dict[str, Any], folder: Path, blocks: list[Block] | None = None
) -> list[Path]:
    """card.md, card.html (``blocks``, or the card's own sections) and card.json."""
    return [
        write_text(render_card_md(card, blocks), folder / CARD_MD_FILE),
        write_text(render_card_html(card, blocks), folder / CARD_HTML_FILE),
        write_json(card, folder / CARD_JSON_FILE),
    ]
