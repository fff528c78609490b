"""``report.html``: a self-contained page (figures inlined as PNG data) built from a run's
artifacts alone, so it opens offline and ``sago report <run>`` needs no model.

Sections (``markup.Section``, in one list in ``render_report``: a new part is one more item),
the story first, then the tables: the headline block (report/page/headline.py: per model the
unstable axes at each eps, the worst family/subtype and instance, the flip rates, the verdicts
against the previous release when the run holds them); the figures that answer how stable,
where and how bad (report/page/story.py: pooled SGS per axis with intervals, the dose-response by
family and strength, SGS per dataset, the worst variants); then the page's own tables
(report/page/results.py): pooled SGS per model and axis
with p-values at the three tolerances and marks; per dataset; variants kept and rejected per
family; missing axes with their reasons (and how many measurements were non-finite); beyond
the mean (report/sections/insights.py: tail risk beside SGS, axis structure, graded mirroring, the
instance explorer), when their artifacts exist; more figures; where Act is read (per-layer
cosine curves at the answer start and at the end of the user's text, from analysis.parquet,
when the caller passes it); provenance from the manifest (report/page/provenance.py).
Every p-value is written by ``markup.p_value``; every table scrolls in its own box with its
first column fixed.

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

import json
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
from sago_core.report.markup import Section, page
from sago_core.report.markup import table as _table
from sago_core.report.page.headline import glances, headline_html, weak_rewriter_note
from sago_core.report.page.provenance import (
    identity_drift,
    placeholder_note,
    provenance_of,
    provenance_table,
)
from sago_core.report.page.results import (
    correctness_section,
    dataset_table,
    layer_section,
    method_note,
    missing_table,
    noise_floor,
    pooled_table,
    rankings_section,
)
from sago_core.report.page.story import more_figures, story_section
from sago_core.report.sections.budget import budget_headline, budget_sections
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
from sago_core.report.summary_md import kept_counts
from sago_core.scoring.encoder import provenance_encoder
from sago_core.stages.refusal import RefusalTables
from sago_core.vocabulary import REPLAY_FAMILY, ROW_KEY

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


HTML_FIXED_BYTES = 1_500_000  # figures (PNG), tables, style and the explorer's script
HTML_BYTES_PER_VARIANT = 400  # one explorer row: codes, numbers, its texts gzipped


def html_size_bound(variants: int) -> int:
    """The most bytes report.html takes for a run of ``variants`` instances (one model,
    answers of up to ~100 tokens; the module doc says how it was measured)."""
    return HTML_FIXED_BYTES + HTML_BYTES_PER_VARIANT * min(variants, MAX_ROWS)


MAX_HTML_BYTES = html_size_bound(MAX_ROWS)

HEADLINE = "headline"  # the id of the block that opens the page


# The columns the report reads of the artifacts whose other columns it never uses (the
# rest it reads whole): generations.parquet without its prompt texts and token ids,
# variants.parquet's family and verdict (the kept table), analysis.parquet's curves.
REPORT_COLUMNS: dict[str, tuple[str, ...]] = {
    GENERATIONS_FILE: tuple(
        c for c in GENERATIONS if c not in ("prompt_text", "response_token_ids")
    ),
    VARIANTS_FILE: ("family", "kept"),
    ANALYSIS_FILE: (*ROW_KEY, "layer_cosines", "layer_cosines_user"),
}


def read_for_report(path: str | Path, name: str) -> pl.DataFrame:
    """Artifact ``name`` (a file name of the run layout) as the report reads it: only its
    ``REPORT_COLUMNS`` when it has an entry there, else whole."""
    return read_parquet(path, REPORT_COLUMNS.get(name))


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
    instances, tails = (insights.instances, insights.tails) if insights else (None, None)
    at_a_glance = glances(summary, variant_deltas, instances, tails, paired, paired_note)
    parts: list[Section | str] = [
        "<h1>SAGO report</h1>",
        Section(
            HEADLINE,
            "At a glance",
            headline_html(
                at_a_glance, encoder, weak_rewriter_note(provenance, variants), bool(budget)
            )
            + budget_headline(budget[0] if budget else None),
        ),
        identity_drift(generations),
        story_section(summary, variant_deltas, instances),
        Section("method", "How to read it", method_note(summary, bool(budget))),
        Section("pooled", "Pooled SGS per model and axis", pooled_table(summary, encoder)),
        *budget_sections(*(budget or (None, None))),
        *peer_sections(peer_metrics, summary, encoder),
        *sampling_sections(sampling_tests, variance_components),
        *tail_sections(insights, summary),
        *language_sections(deltas, instances, generations),
        *refusal_sections(prompts, generations, instances, refusal),
        Section("per-dataset", "Per dataset", dataset_table(summary)),
        Section(
            "variants-kept",
            "Variants kept by the semantic filter",
            _table(["family", "kept", "rejected"], [[str(v) for v in r] for r in kept.rows()])
            + placeholder_note(prompts),
        ),
        Section(
            "correctness",
            "Stability and correctness",
            correctness_section(prompts, generations, scores),
        ),
        Section("rankings", "Rankings across datasets", rankings_section(summary)),
        Section("noise-floor", "Noise floor", noise_floor(deltas, summary)),
        Section("missing", "Missing measurements", missing_table(variant_deltas)),
        *detail_sections(insights, prompts),
        more_figures(scores, variant_deltas),
        *(
            [
                Section(
                    "layers",
                    "Where Act is read (per-layer cosines)",
                    layer_section(analysis, deltas),
                )
            ]
            if analysis is not None
            else []
        ),
        *locate_sections(located),
        Section("provenance", "Provenance", provenance_table(provenance)),
    ]
    return page("SAGO report", STYLE, parts)
