"""The report page's own tables, read from the run's core artifacts: how to read it, pooled
SGS per model and axis, per dataset, stability beside correctness, rankings across datasets,
the noise floor, missing measurements and where Act is read (per-layer cosines)."""

from __future__ import annotations

import html

import polars as pl

from sago_core.data.prompt import NO_REASON_RECORDED
from sago_core.report import figures
from sago_core.report.markup import NA, axis_rank, fmt, p_value
from sago_core.report.markup import image as _image
from sago_core.report.markup import table as _table
from sago_core.report.summary_md import marks_legend, sgs_cell
from sago_core.scoring.encoder import axis_label
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
    ROW_KEY,
)


def method_note(summary: pl.DataFrame, budgeted: bool = False) -> str:
    """``budgeted``: the eps tests are a budgeted run's stopping rule's, not corrected again."""
    test = (
        "the budget's stopping rule tests E[s] &gt; eps at its looks, each test at its own "
        "level, and its p-value is in the Holm column uncorrected"
        if budgeted
        else "one-sided t-test of E[s] &gt; 0.05 (or, when the run tests against the noise "
        "floor, paired s &gt; floor); Holm and BH adjust its p-value over all rows of the "
        "summary"
    )
    legend = html.escape(reference_legend(summary, budgeted))
    return (
        "<p>SGS = mean over prompts of the RMS of normalised deltas (0 = identical behaviour "
        f"on every variant). The test: {test}. Significance {legend} "
        "(the Holm column); an uncorrected p below 0.05 alone earns no mark. 95% CI: "
        f"bootstrap over prompts, drawn from at least {MIN_PROMPTS} prompts with a score. "
        "MDE: smallest excess over eps detectable with 80% power at this n.</p>"
    )


def reference_legend(summary: pl.DataFrame, budgeted: bool = False) -> str:
    reference = summary["reference"][0] if "reference" in summary.columns and len(summary) else None
    return marks_legend(reference, budgeted)


def _axes_in(frame: pl.DataFrame) -> list[str]:
    """The registered axes, then any other axis the frame holds (a family's axis such as
    ``lang``, present only in runs with that family), sorted by name."""
    present = set(frame["axis"].drop_nulls().to_list()) if "axis" in frame.columns else set()
    return [*AXES, *sorted(present - set(AXES))]


def pooled_table(summary: pl.DataFrame, encoder: str | None = None) -> str:
    rows = []
    pooled = summary.filter(pl.col("dataset") == POOLED)
    ordered = pooled.with_columns(axis_rank().alias("order"))
    for r in ordered.sort("model", "order", "axis").iter_rows(named=True):
        sgs = sgs_cell(r) or "NA"
        ci = (
            f"[{r['ci_low']:.4f}, {r['ci_high']:.4f}]"
            if r.get("ci_low") is not None and r.get("ci_high") is not None
            else NA
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
                fmt(r.get("floor")),
                p_value(r.get("p_floor")),
                p_value(r.get("p_holm")),
                p_value(r.get("p_bh")),
                fmt(r.get("mde")),
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


def dataset_table(summary: pl.DataFrame) -> str:
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
                cells.append(sgs_cell(index.get((dataset, axis))) or NA)
            body.append([html.escape(dataset), *cells])
        parts.append(f"<h3>{html.escape(model)}</h3>" + _table(["dataset", *names], body))
    return "".join(parts)


def noise_floor(deltas: pl.DataFrame, summary: pl.DataFrame) -> str:
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
                cells = [NA, "0", html.escape(reason)]
            else:
                magnitude = measured["delta_norm"].abs()
                cells = [
                    fmt(magnitude.mean()),
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


def missing_table(deltas: pl.DataFrame) -> str:
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


def layer_section(analysis: pl.DataFrame, deltas: pl.DataFrame) -> str:
    """Per-layer cosine curves per variant family, at both positions (analysis.parquet; the
    family comes from the deltas, the base rows are left out)."""
    families = deltas.select([*ROW_KEY, "family"]).unique(ROW_KEY)
    rows = analysis.join(families, on=ROW_KEY, how="left").with_columns(
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


def correctness_section(
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
            cells.append(f"{fmt(mean)} (n={len(chosen)})")
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


def rankings_section(summary: pl.DataFrame) -> str:
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
                fmt(a.tau),
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
