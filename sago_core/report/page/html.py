"""``report.html``: a self-contained page (figures inlined as PNG data) built from a run's
artifacts alone, so it opens offline and ``sago report <run>`` needs no model.

Sections (``markup.Section``, in one list in ``render_report``: a new part is one more item),
the story first, then the tables: the headline block (report/page/headline.py: per model the
unstable axes at each eps, the worst family/subtype and instance, the flip rates, the verdicts
against the previous release when the run holds them); the figures that answer how stable,
where and how bad (report/page/story.py: pooled SGS per axis with intervals, the dose-response by
family and strength, SGS per dataset, the worst variants); then pooled SGS per model and axis
with p-values at the three tolerances and marks; per dataset; variants kept and rejected per
family; missing axes with their reasons (and how many measurements were non-finite); beyond
the mean (report/sections/insights.py: tail risk beside SGS, axis structure, graded mirroring, the
instance explorer), when their artifacts exist; more figures; where Act is read (per-layer
cosine curves at the answer start and at the end of the user's text, from analysis.parquet,
when the caller passes it); provenance from the manifest. Every p-value is written by
``markup.p_value``; every table scrolls in its own box with its first column fixed.

Size and speed at scale (measured by ``python -m bench.report_scale``). No figure
draws a point per instance: each aggregates first, so the figures and tables are a part of
fixed size for a given number of models, datasets and families (about 1 MB of PNG for one
model on the paper grid). What grows is the instance explorer (report/sections/explorer.py): every
variant once, each distinct text stored once, the whole gzipped and base64-encoded, and at
most ``explorer.MAX_ROWS`` variants (beyond, the worst per group). So the page is at most
``html_size_bound(variants)`` bytes for answers of up to ~100 tokens (the paper's
``max_new_tokens``): ``HTML_FIXED_BYTES`` plus ``HTML_BYTES_PER_VARIANT`` per embedded
variant, ``MAX_HTML_BYTES`` in all. Measured for one model: 1.29 MB at 984 variants, 3.27 MB
at 7,830 (about 1.0 MB plus 290 bytes a variant); longer answers take more per variant.
The render reads only the columns it uses of the largest artifacts (``REPORT_COLUMNS``) and
takes about the same time at 1,000 and 8,000 instances: its cost is matplotlib's drawing.
"""

from __future__ import annotations

import html
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from sago_core.artifacts.layout import (
    ANALYSIS_FILE,
    CARD_JSON_FILE,
    DELTAS_FILE,
    GENERATIONS_FILE,
    PROMPTS_FILE,
    SCORES_FILE,
    SUMMARY_FILE,
    VARIANTS_FILE,
    RunLayout,
)
from sago_core.artifacts.schemas import GENERATIONS
from sago_core.artifacts.store import read_parquet
from sago_core.backends.api_served import describe_drift, drifted
from sago_core.data.placeholders import find_placeholders
from sago_core.data.prompt import NO_REASON_RECORDED
from sago_core.report import figures
from sago_core.report.budget_section import budget_headline, budget_sections
from sago_core.report.markup import Section, p_value, page
from sago_core.report.markup import image as _image
from sago_core.report.markup import table as _table
from sago_core.report.page.headline import glances, headline_html, weak_rewriter_note
from sago_core.report.page.story import more_figures, story_section
from sago_core.report.sections.explorer import MAX_ROWS
from sago_core.report.sections.insights import (
    Insights,
    detail_sections,
    insights_from_run,
    tail_sections,
)
from sago_core.report.sections.language import language_sections
from sago_core.report.sections.locate import Located, locate_sections, located_from_run
from sago_core.report.sections.peer import peer_metrics_from_run, peer_sections
from sago_core.report.sections.refusal import refusal_sections
from sago_core.report.sections.refusal_tables import refusal_from_run
from sago_core.report.sections.sampling import sampling_from_run, sampling_sections
from sago_core.report.summary_md import kept_counts, marks_legend, sgs_cell
from sago_core.scoring.encoder import axis_label, provenance_encoder
from sago_core.stages.refusal import RefusalTables
from sago_core.statistics.correctness import is_correct
from sago_core.statistics.intervals import MIN_PROMPTS
from sago_core.statistics.rankings import rank_agreement, rank_reversals
from sago_core.vocabulary import (
    AXES,
    BASE_FAMILY,
    BASE_VARIANT_ID,
    NON_FINITE,
    POOLED,
    REPLAY_FAMILY,
)

STYLE = """
body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:1200px;padding:0 1rem;
color:#222;overflow-wrap:anywhere}
table{border-collapse:collapse;margin:0.5rem 0 1.5rem}th,td{border:1px solid #ccc;
padding:0.25rem 0.5rem;text-align:right;font-size:0.9rem;overflow-wrap:normal}
.scroll td{white-space:nowrap}.scroll td.l{white-space:normal;min-width:4rem}
.scroll td div.w{white-space:normal;min-width:16rem;text-align:left}
th{background:#f3f3f3}td.l,th.l{text-align:left}
.scroll{overflow-x:auto;max-width:100%}.scroll table{margin-bottom:0.75rem}
.scroll tr>:first-child{position:sticky;left:0;z-index:1;background:#fff;
box-shadow:inset -1px 0 0 #ccc}.scroll tr>th:first-child{background:#f3f3f3}
img{max-width:100%;height:auto;border:1px solid #eee;margin:0.5rem 0}
.na{color:#a00}code{background:#f6f6f6;padding:0 0.2rem}
#headline{border:1px solid #cdd;background:#f7fafa;padding:0.25rem 1rem 0.5rem;margin:1rem 0}
#headline h3{margin:0.75rem 0 0.25rem}#headline ul{margin:0.25rem 0;padding-left:1.25rem}
#headline li{margin:0.15rem 0}.glance-note{font-size:0.85rem;color:#555}
"""


def _fmt(value: Any, digits: int = 4) -> str:
    if value is None:
        return '<span class="na">NA</span>'
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1e-3 and value != 0 else f"{value:.{digits}f}"
    return html.escape(str(value))


HTML_FIXED_BYTES = 1_500_000  # figures (PNG), tables, style and the explorer's script
HTML_BYTES_PER_VARIANT = 400  # one explorer row: codes, numbers, its texts gzipped


def html_size_bound(variants: int) -> int:
    """The most bytes report.html takes for a run of ``variants`` instances (one model,
    answers of up to ~100 tokens; the module doc says how it was measured)."""
    return HTML_FIXED_BYTES + HTML_BYTES_PER_VARIANT * min(variants, MAX_ROWS)


MAX_HTML_BYTES = html_size_bound(MAX_ROWS)

HEADLINE = "headline"  # the id of the block that opens the page


def _method_note(summary: pl.DataFrame) -> str:
    return (
        "<p>SGS = mean over prompts of the RMS of normalised deltas (0 = identical behaviour "
        "on every variant). The test: one-sided t-test of E[s] &gt; 0.05 (or, when the run "
        "tests against the noise floor, paired s &gt; floor); Holm and BH adjust its p-value "
        f"over all rows of the summary. Significance {html.escape(_reference_legend(summary))} "
        "(the Holm column); an uncorrected p below 0.05 alone earns no mark. 95% CI: "
        f"bootstrap over prompts, drawn from at least {MIN_PROMPTS} prompts with a score. "
        "MDE: smallest excess over eps detectable with 80% power at this n.</p>"
    )


def _reference_legend(summary: pl.DataFrame) -> str:
    reference = summary["reference"][0] if "reference" in summary.columns and len(summary) else None
    return marks_legend(reference)


def _axes_in(frame: pl.DataFrame) -> list[str]:
    """The registered axes, then any other axis the frame holds (a family's axis such as
    ``lang``, present only in runs with that family), sorted by name."""
    present = set(frame["axis"].drop_nulls().to_list()) if "axis" in frame.columns else set()
    return [*AXES, *sorted(present - set(AXES))]


def _pooled_table(summary: pl.DataFrame, encoder: str | None = None) -> str:
    rows = []
    pooled = summary.filter(pl.col("dataset") == POOLED)
    ordered = pooled.with_columns(
        pl.col("axis")
        .replace_strict(
            {axis: i for i, axis in enumerate(AXES)}, default=len(AXES), return_dtype=pl.Int32
        )
        .alias("order")
    )
    for r in ordered.sort("model", "order", "axis").iter_rows(named=True):
        sgs = sgs_cell(r) or "NA"
        ci = (
            f"[{r['ci_low']:.4f}, {r['ci_high']:.4f}]"
            if r.get("ci_low") is not None and r.get("ci_high") is not None
            else '<span class="na">NA</span>'
            + (f" ({html.escape(r['ci_missing_reason'])})" if r.get("ci_missing_reason") else "")
        )
        rows.append(
            [
                html.escape(r["model"]),
                html.escape(axis_label(r["axis"], encoder)),
                sgs,
                ci,
                str(r["n"]),
                p_value(r["p_eps_0_01"]),
                p_value(r["p_eps_0_05"]),
                p_value(r["p_eps_0_10"]),
                _fmt(r.get("floor")),
                p_value(r.get("p_floor")),
                p_value(r.get("p_holm")),
                p_value(r.get("p_bh")),
                _fmt(r.get("mde")),
            ]
        )
    headers = [
        "model",
        "axis",
        "SGS",
        "95% CI",
        "n",
        "p (eps .01)",
        "p (eps .05)",
        "p (eps .10)",
        "noise floor",
        "p (> floor)",
        "Holm",
        "BH",
        "MDE 80%",
    ]
    return _table(headers, rows, left=2)


def _dataset_table(summary: pl.DataFrame) -> str:
    parts = []
    for model in sorted(summary["model"].unique().to_list()):
        rows = summary.filter(pl.col("model") == model)
        datasets = sorted(d for d in rows["dataset"].unique().to_list() if d != POOLED)
        index = {(r["dataset"], r["axis"]): r for r in rows.iter_rows(named=True)}
        body = []
        names = _axes_in(rows)
        for dataset in datasets:
            cells = []
            for axis in names:
                cells.append(sgs_cell(index.get((dataset, axis))) or '<span class="na">NA</span>')
            body.append([html.escape(dataset), *cells])
        parts.append(f"<h3>{html.escape(model)}</h3>" + _table(["dataset", *names], body))
    return "".join(parts)


def _noise_floor(deltas: pl.DataFrame, summary: pl.DataFrame) -> str:
    replay = deltas.filter(pl.col("family") == REPLAY_FAMILY)
    if not len(replay):
        return "<p>No replay in this run (variants.replay is off): no noise floor.</p>"
    rows = []
    reference = summary["reference"][0] if "reference" in summary.columns else "eps 0.05"
    for model in sorted(replay["model"].unique().to_list()):
        for axis in _axes_in(replay):
            chosen = replay.filter((pl.col("model") == model) & (pl.col("axis") == axis))
            measured = chosen.drop_nulls("delta_norm")
            if not len(measured):
                reasons = chosen["missing_reason"].drop_nulls().to_list()
                reason = str(reasons[0]) if reasons else "no replay"
                cells = ['<span class="na">NA</span>', "0", html.escape(reason)]
            else:
                magnitude = measured["delta_norm"].abs()
                cells = [
                    _fmt(magnitude.mean()),
                    str(len(measured)),
                    f"{int((magnitude > 0).sum())} of {len(measured)} prompts differ",
                ]
            rows.append([html.escape(model), axis, *cells])
    intro = (
        "<p>The base prompt asked again under the same settings; its |normalised delta| is "
        "what the backend varies by itself. Significance marks test against: "
        f"<b>{html.escape(str(reference))}</b>.</p>"
    )
    return intro + _table(["model", "axis", "mean |delta_norm|", "n", "note"], rows, left=2)


def _missing(deltas: pl.DataFrame) -> str:
    gaps = (
        deltas.filter(pl.col("missing_reason").is_not_null())
        .group_by("model", "axis", "missing_reason")
        .len()
        .sort("model", "axis")
    )
    non_finite = int(gaps.filter(pl.col("missing_reason") == NON_FINITE)["len"].sum())
    count = (
        f"<p>{html.escape(NON_FINITE)}: {non_finite} (a NaN or inf from the backend or a "
        "scorer, recorded as missing, never averaged).</p>"
    )
    if not len(gaps):
        return "<p>Every axis was measured for every kept variant.</p>" + count
    rows = [
        [html.escape(r["model"]), r["axis"], html.escape(r["missing_reason"]), str(r["len"])]
        for r in gaps.iter_rows(named=True)
    ]
    return _table(["model", "axis", "reason", "variants"], rows, left=3) + count


ANALYSIS_KEY = ["model", "dataset", "prompt_id", "variant_id"]

# The columns the report reads of the artifacts whose other columns it never uses (the
# rest it reads whole): generations.parquet without its prompt texts and token ids,
# variants.parquet's family and verdict (the kept table), analysis.parquet's curves.
REPORT_COLUMNS: dict[str, tuple[str, ...]] = {
    GENERATIONS_FILE: tuple(
        c for c in GENERATIONS if c not in ("prompt_text", "response_token_ids")
    ),
    VARIANTS_FILE: ("family", "kept"),
    ANALYSIS_FILE: (*ANALYSIS_KEY, "layer_cosines", "layer_cosines_user"),
}


def read_for_report(path: str | Path, name: str) -> pl.DataFrame:
    """Artifact ``name`` (a file name of the run layout) as the report reads it: only its
    ``REPORT_COLUMNS`` when it has an entry there, else whole."""
    return read_parquet(path, REPORT_COLUMNS.get(name))


def _layer_section(analysis: pl.DataFrame, deltas: pl.DataFrame) -> str:
    """Per-layer cosine curves per variant family, at both positions (analysis.parquet; the
    family comes from the deltas, the base rows are left out)."""
    families = deltas.select([*ANALYSIS_KEY, "family"]).unique(ANALYSIS_KEY)
    rows = analysis.join(families, on=ANALYSIS_KEY, how="left").with_columns(
        pl.coalesce(pl.col("family"), pl.col("variant_id").str.split(":").list.first())
    )
    if "layer_cosines_user" not in rows.columns:  # analysis written before the second curve
        rows = rows.with_columns(pl.lit(None, pl.List(pl.Float64)).alias("layer_cosines_user"))
    measured = rows.filter(pl.col("family") != BASE_FAMILY)
    if not len(measured.drop_nulls("layer_cosines")):
        return "<p>No hidden states in this run (e.g. an API model): no layer curves.</p>"
    user = measured["layer_cosines_user"].drop_nulls().len()
    note = (
        ""
        if user
        else " The backend gave no hidden states at the end of the user's text: one line."
    )
    return (
        "<p>Mean over variants of cos(h_l(variant), h_l(base)) - 1 per layer l. "
        "<b>answer start (axis)</b>: the rendered prompt's last token, where the answer starts, "
        "the position Act is measured at; <b>end of user text</b>: the last token of the "
        f"user's own text inside the chat template.{note}</p>"
        + _image(
            "layer-curves",
            figures.layer_curves(rows),
            "Per-layer mean cos - 1 to the base, per model and variant family, at two positions",
        )
    )


def _provenance(manifest: dict[str, Any]) -> str:
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


def _placeholder_note(prompts: pl.DataFrame) -> str:
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


def _identity_drift(generations: pl.DataFrame) -> str:
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


def _correctness_section(
    prompts: pl.DataFrame, generations: pl.DataFrame, scores: pl.DataFrame
) -> str:
    # a thinking model's answer is what follows its reasoning block (answer_text)
    answers = "answer_text" if "answer_text" in generations.columns else "response_text"
    base = generations.filter(pl.col("variant_id") == BASE_VARIANT_ID).join(
        prompts.select("dataset", "prompt_id", "references"), on=["dataset", "prompt_id"]
    )
    verdicts = pl.DataFrame(
        {
            "model": base["model"],
            "dataset": base["dataset"],
            "prompt_id": base["prompt_id"],
            "correct": [
                is_correct(r, refs)
                for r, refs in zip(base[answers], base["references"], strict=True)
            ],
        },
        schema_overrides={"correct": pl.Boolean},
    )
    joined = scores.join(verdicts, on=["model", "dataset", "prompt_id"], how="left")
    rows = []
    order = {axis: i for i, axis in enumerate(_axes_in(joined))}
    groups = sorted(joined.group_by(["model", "axis"]), key=lambda g: (g[0][0], order[g[0][1]]))
    for (model, axis), frame in groups:
        cells = []
        for flag in (True, False):
            chosen = frame.filter(pl.col("correct") == flag).drop_nulls("s")
            mean = chosen["s"].mean() if len(chosen) else None
            cells.append(f"{_fmt(mean)} (n={len(chosen)})")
        unknown = frame.filter(pl.col("correct").is_null()).height
        rows.append([html.escape(str(model)), str(axis), *cells, str(unknown)])
    return (
        "<p>Base answer judged correct when a normalised reference answer occurs in it "
        "(lower-case, no punctuation or articles, whole words). SGS here is the mean of "
        "per-prompt scores over those prompts.</p>"
        + _table(
            ["model", "axis", "SGS, answered right", "SGS, answered wrong", "no reference"],
            rows,
            left=2,
        )
        + _unreferenced(prompts)
    )


def _unreferenced(prompts: pl.DataFrame) -> str:
    """Per dataset, its prompts without reference answers and why (prompts.parquet's
    ``reference_missing_reason``; a run written before it held none says so)."""
    reason = (
        pl.col("reference_missing_reason")
        if "reference_missing_reason" in prompts.columns
        else pl.lit(None, pl.String)
    )
    counts = (
        prompts.filter(pl.col("references").list.len().fill_null(0) == 0)
        .group_by("dataset", reason.fill_null(NO_REASON_RECORDED).alias("reason"))
        .len()
        .sort("dataset", "reason")
    )
    if not len(counts):
        return ""
    items = "".join(
        f"<li>{html.escape(str(dataset))}: {n} prompt(s), {html.escape(str(why))}</li>"
        for dataset, why, n in counts.iter_rows()
    )
    return f"<p>Not judged, per dataset (no reference answers, and why):</p><ul>{items}</ul>"


def _rankings_section(summary: pl.DataFrame) -> str:
    models = summary["model"].unique().to_list()
    if len(models) < 2:
        return "<p>Rankings need at least two models in the run.</p>"
    parts = []
    per_dataset = summary.filter((pl.col("dataset") != POOLED) & pl.col("sgs").is_not_null())
    for axis in _axes_in(summary):
        scores: dict[str, dict[str, float]] = {}
        for r in per_dataset.filter(pl.col("axis") == axis).iter_rows(named=True):
            scores.setdefault(r["dataset"], {})[r["model"]] = r["sgs"]
        agreement = [
            [
                html.escape(a.dataset_a),
                html.escape(a.dataset_b),
                _fmt(a.tau),
                p_value(a.p_value),
                str(a.n_models),
            ]
            for a in rank_agreement(scores)
        ]
        flips = rank_reversals(scores)
        parts.append(f"<h3>{axis}</h3>")
        parts.append(
            _table(["dataset", "dataset", "Kendall tau", "p", "models"], agreement, left=2)
        )
        parts.append(
            f"<p>{len(flips)} rank reversal(s)"
            + (
                ": "
                + "; ".join(
                    html.escape(f"{f.model_a} < {f.model_b} on {f.dataset_a}, > on {f.dataset_b}")
                    for f in flips[:20]
                )
                if flips
                else ""
            )
            + ".</p>"
        )
    return "".join(parts)


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


def report_from_run(run_dir: Path) -> str:
    """Rebuild the report of a finished run from its artifacts alone."""
    layout = RunLayout(run_dir)
    manifest = json.loads(layout.manifest.read_text(encoding="utf-8"))
    return render_report(
        pl.read_parquet(run_dir / SUMMARY_FILE),
        pl.read_parquet(run_dir / SCORES_FILE),
        pl.read_parquet(run_dir / DELTAS_FILE),
        read_for_report(run_dir / VARIANTS_FILE, VARIANTS_FILE),
        pl.read_parquet(run_dir / PROMPTS_FILE),
        read_for_report(run_dir / GENERATIONS_FILE, GENERATIONS_FILE),
        provenance_of(manifest),
        read_analysis(layout.per_model_files(ANALYSIS_FILE)),
        insights=insights_from_run(run_dir),
        located=located_from_run(run_dir),
        peer_metrics=peer_metrics_from_run(run_dir),
        **sampling_from_run(run_dir),
        **paired_from_card(run_dir),
        refusal=refusal_from_run(run_dir),
    )


def paired_from_card(run_dir: Path) -> dict[str, Any]:
    """The comparison with an earlier release a card in the run folder holds (card.json:
    ``paired``, or ``paired_note`` saying why there is none); nothing without a card."""
    path = run_dir / CARD_JSON_FILE
    if not path.is_file():
        return {}
    card = json.loads(path.read_text(encoding="utf-8"))
    return {"paired": card.get("paired"), "paired_note": card.get("paired_note")}


def read_analysis(paths: list[Path] | list[str]) -> pl.DataFrame | None:
    """Every model's analysis.parquet as one frame, the columns the report reads (None
    when there is none)."""
    frames = [read_for_report(p, ANALYSIS_FILE) for p in paths]
    return pl.concat(frames, how="diagonal_relaxed") if frames else None


def render_report(
    summary: pl.DataFrame,
    scores: pl.DataFrame,
    deltas: pl.DataFrame,
    variants: pl.DataFrame,
    prompts: pl.DataFrame,
    generations: pl.DataFrame,
    provenance: dict[str, Any],
    analysis: pl.DataFrame | None = None,
    insights: Insights | None = None,
    located: Located | None = None,
    peer_metrics: pl.DataFrame | None = None,
    sampling_tests: pl.DataFrame | None = None,
    variance_components: pl.DataFrame | None = None,
    paired: dict[str, Any] | None = None,
    paired_note: str | None = None,
    budget: tuple[dict[str, Any], pl.DataFrame] | None = None,
    refusal: RefusalTables | None = None,
) -> str:
    """The page, its headline block first; ``paired`` (card.json's ``paired`` block: the
    pooled verdicts against an earlier release) or ``paired_note`` (why there is none) feed
    the headline's comparison; ``analysis`` (the models' analysis.parquet, concatenated) adds the
    where-Act-is-read section, left out when None; ``insights`` (instances, tails, axis
    structure) the tail-risk, axis-structure, graded-mirroring and explorer sections;
    ``peer_metrics`` (peer_metrics.parquet) the peer indices beside SGS; ``sampling_tests``
    and ``variance_components`` (a run at K > 1 samples) the stability-under-sampling
    section; ``budget`` (a budgeted run's budget.json and budget_estimates.parquet) its line
    in the headline and the design's section; ``refusal`` (the refusal stage's tables, every
    sample at K > 1) the refusal section's numbers, else computed from ``generations``."""
    kept = kept_counts(variants)
    encoder = provenance_encoder(provenance)  # named beside every BERT number
    variant_deltas = deltas.filter(pl.col("family") != REPLAY_FAMILY)
    at_a_glance = glances(
        summary,
        variant_deltas,
        insights.instances if insights is not None else None,
        insights.tails if insights is not None else None,
        paired,
        paired_note,
    )
    parts: list[Section | str] = [
        "<h1>SAGO report</h1>",
        Section(
            HEADLINE,
            "At a glance",
            headline_html(at_a_glance, encoder, weak_rewriter_note(provenance, variants))
            + budget_headline(budget[0] if budget else None),
        ),
        _identity_drift(generations),
        story_section(
            summary, variant_deltas, insights.instances if insights is not None else None
        ),
        Section("method", "How to read it", _method_note(summary)),
        Section("pooled", "Pooled SGS per model and axis", _pooled_table(summary, encoder)),
        *budget_sections(*(budget or (None, None))),
        *peer_sections(peer_metrics, summary, encoder),
        *sampling_sections(sampling_tests, variance_components),
        *tail_sections(insights, summary),
        *language_sections(
            deltas, insights.instances if insights is not None else None, generations
        ),
        *refusal_sections(prompts, generations, insights.instances if insights else None, refusal),
        Section("per-dataset", "Per dataset", _dataset_table(summary)),
        Section(
            "variants-kept",
            "Variants kept by the semantic filter",
            _table(
                ["family", "kept", "rejected"],
                [
                    [r["family"], str(r["kept"]), str(r["rejected"])]
                    for r in kept.iter_rows(named=True)
                ],
            )
            + _placeholder_note(prompts),
        ),
        Section(
            "correctness",
            "Stability and correctness",
            _correctness_section(prompts, generations, scores),
        ),
        Section("rankings", "Rankings across datasets", _rankings_section(summary)),
        Section("noise-floor", "Noise floor", _noise_floor(deltas, summary)),
        Section("missing", "Missing measurements", _missing(variant_deltas)),
        *detail_sections(insights, prompts),
        more_figures(scores, variant_deltas),
        *(
            [
                Section(
                    "layers",
                    "Where Act is read (per-layer cosines)",
                    _layer_section(analysis, deltas),
                )
            ]
            if analysis is not None
            else []
        ),
        *locate_sections(located),
        Section("provenance", "Provenance", _provenance(provenance)),
    ]
    return page("SAGO report", STYLE, parts)
