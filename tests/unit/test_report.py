"""report.html: self-contained, five real figures, tables equal to values from the deltas."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from sago_core.report.page.html import render_report
from sago_core.scoring.prompt_scores import score_prompts
from sago_core.scoring.summary import summarize
from sago_core.vocabulary import AXES, SCALES

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _deltas() -> pl.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for dataset in ("d1", "d2"):
        for p in range(4):
            for strength, position in ((2.0, "prefix"), (-2.0, "suffix"), (4.0, "global")):
                for axis in AXES:
                    missing = axis == "act"  # as for an API model: no hidden states
                    delta = None if missing else float(-abs(rng.normal(0.1, 0.05)) * SCALES[axis])
                    rows.append(
                        {
                            "model": "hf:m",
                            "dataset": dataset,
                            "prompt_id": f"{dataset}-{p}",
                            "variant_id": f"register:{strength:+.0f}:{position}",
                            "family": "register",
                            "subtype": "politeness",
                            "strength": strength,
                            "position": position,
                            "axis": axis,
                            "delta": delta,
                            "delta_norm": None if delta is None else delta / SCALES[axis],
                            "missing_reason": "backend exposes no hidden states"
                            if missing
                            else None,
                        }
                    )
            for axis in AXES:  # the replay: a small floor on prob, exact elsewhere
                delta = {"prob": -0.5}.get(axis, 0.0)
                rows.append(
                    {
                        "model": "hf:m",
                        "dataset": dataset,
                        "prompt_id": f"{dataset}-{p}",
                        "variant_id": "replay:base:0:global",
                        "family": "replay",
                        "subtype": "base",
                        "strength": 0.0,
                        "position": "global",
                        "axis": axis,
                        "delta": delta,
                        "delta_norm": None if delta is None else delta / SCALES[axis],
                        "missing_reason": None,
                    }
                )
    return pl.DataFrame(rows)


def _answers() -> tuple[pl.DataFrame, pl.DataFrame]:
    """Prompts with references on d1 only, and base answers: d1-0 and d1-1 are right."""
    prompts = pl.DataFrame(
        {
            "dataset": ["d1"] * 4 + ["d2"] * 4,
            "prompt_id": [f"d{d}-{p}" for d in (1, 2) for p in range(4)],
            "references": [["Paris"]] * 4 + [[]] * 4,
        }
    )
    generations = prompts.select(
        pl.lit("hf:m").alias("model"),
        "dataset",
        "prompt_id",
        pl.lit("base").alias("variant_id"),
        pl.Series("response_text", ["Paris.", "Paris is it.", "Lyon.", "No."] + ["x"] * 4),
    )
    return prompts, generations


def test_report_tables_equal_values_recomputed_from_deltas() -> None:
    deltas = _deltas()
    scores = score_prompts(deltas)
    summary = summarize(scores)
    variants = pl.DataFrame({"family": ["register", "register"], "kept": [True, False]})
    prompts, generations = _answers()
    page = render_report(
        summary, scores, deltas, variants, prompts, generations, {"run_id": "r", "config": {}}
    )

    images = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(images) == 5  # no instances.parquet: no worst-instances figure
    assert page.index('id="fig-sgs-intervals"') < page.index("<table")  # figures first
    assert all(base64.b64decode(i).startswith(PNG_SIGNATURE) for i in images)
    assert "http://" not in page and "https://" not in page  # opens offline

    for axis in ("bleu", "bert", "prob", "ent", "mr"):
        per_prompt = (
            deltas.filter((pl.col("axis") == axis) & (pl.col("family") != "replay"))
            .group_by("dataset", "prompt_id")
            .agg((pl.col("delta_norm") ** 2).mean().sqrt().alias("s"))
        )
        pooled = per_prompt.group_by("dataset").agg(pl.col("s").mean())["s"].mean()
        cell = re.search(rf"<td class=\"l\">{axis}</td><td>([0-9.]+)", page)
        assert cell is not None and float(cell.group(1)) == round(pooled, 4)
    assert re.search(r'<td class="l">act</td><td>NA</td>', page)
    assert "backend exposes no hidden states" in page
    floor_row = re.search(r'<td class="l">prob</td><td>([0-9.]+)</td><td>8</td>', page)
    assert floor_row is not None and float(floor_row.group(1)) == round(0.5 / SCALES["prob"], 4)
    mr_floor = re.search(r'<td class="l">mr</td><td>([0-9.]+)</td><td>8</td>', page)
    assert mr_floor is not None and float(mr_floor.group(1)) == 0.0  # MR floor: 0 by design
    assert "non-finite measurement: 0 " in page


def test_report_splits_stability_by_correctness_and_ranks_need_two_models() -> None:
    deltas = _deltas()
    scores = score_prompts(deltas)
    summary = summarize(scores)
    prompts, generations = _answers()
    variants = pl.DataFrame({"family": ["register"], "kept": [True]})
    page = render_report(summary, scores, deltas, variants, prompts, generations, {})
    bleu = scores.filter((pl.col("axis") == "bleu") & (pl.col("dataset") == "d1")).sort("prompt_id")
    right = bleu["s"][:2].mean()
    assert f"{right:.4f} (n=2)" in page  # d1-0 and d1-1 answered right
    assert "Rankings need at least two models" in page
    two = pl.concat(
        [summary, summary.with_columns(pl.lit("hf:other").alias("model"), pl.col("sgs") * 2)]
    )
    page_two = render_report(two, scores, deltas, variants, prompts, generations, {})
    assert "Kendall tau" in page_two


def _analysis(deltas: pl.DataFrame) -> pl.DataFrame:
    """Per-layer cosines per variant: 1 - 0.1 x layer at the answer start, half that at the
    end of the user's text; the replay at 1 (no movement)."""
    keys = deltas.select("model", "dataset", "prompt_id", "variant_id").unique(maintain_order=True)
    replay = keys["variant_id"].str.starts_with("replay")
    return keys.with_columns(
        pl.Series(
            "layer_cosines",
            [[1.0] * 3 if r else [0.9, 0.8, 0.7] for r in replay],
            dtype=pl.List(pl.Float64),
        ),
        pl.Series(
            "layer_cosines_user",
            [[1.0] * 3 if r else [0.95, 0.9, 0.85] for r in replay],
            dtype=pl.List(pl.Float64),
        ),
    )


def test_report_draws_both_layer_curves_from_analysis() -> None:
    from sago_core.report.figures import _mean_curve

    deltas = _deltas()
    scores = score_prompts(deltas)
    summary = summarize(scores)
    prompts, generations = _answers()
    variants = pl.DataFrame({"family": ["register"], "kept": [True]})
    analysis = _analysis(deltas)
    page = render_report(
        summary, scores, deltas, variants, prompts, generations, {}, analysis=analysis
    )
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(images) == 6 and 'id="fig-layer-curves"' in page
    assert "answer start (axis)" in page and "end of user text" in page
    register = analysis.filter(~pl.col("variant_id").str.starts_with("replay"))
    axis_curve = _mean_curve(register["layer_cosines"])
    user_curve = _mean_curve(register["layer_cosines_user"])
    assert axis_curve is not None and user_curve is not None
    assert axis_curve.tolist() == pytest.approx([-0.1, -0.2, -0.3])
    assert user_curve.tolist() == pytest.approx([-0.05, -0.1, -0.15])
    # an old analysis file, or a backend without user-text states: one line, said so
    old = analysis.drop("layer_cosines_user")
    page_old = render_report(summary, scores, deltas, variants, prompts, generations, {}, old)
    assert 'id="fig-layer-curves"' in page_old and "one line" in page_old
    # no analysis passed: no section
    plain = render_report(summary, scores, deltas, variants, prompts, generations, {})
    assert "fig-layer-curves" not in plain


def test_sago_report_rebuilds_the_layer_curves_from_each_models_analysis(tmp_path: Path) -> None:
    from sago_core.report.page.html import report_from_run

    deltas = _deltas()
    scores = score_prompts(deltas)
    prompts, generations = _answers()
    frames = {
        "summary": summarize(scores),
        "scores": scores,
        "deltas": deltas,
        "variants": pl.DataFrame({"family": ["register"], "kept": [True]}),
        "prompts": prompts,
        "generations": generations,
    }
    for name, frame in frames.items():
        frame.write_parquet(tmp_path / f"{name}.parquet")
    manifest = {"run_id": "r", "config": {}, "models": {}, "packages": {}}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    assert "fig-layer-curves" not in report_from_run(tmp_path)  # no model folder: no section
    (tmp_path / "models" / "hf_m-1234").mkdir(parents=True)
    _analysis(deltas).write_parquet(tmp_path / "models" / "hf_m-1234" / "analysis.parquet")
    assert 'id="fig-layer-curves"' in report_from_run(tmp_path)


def test_the_report_counts_prompts_with_placeholder_like_text() -> None:
    from sago_core.report.page.provenance import placeholder_note as _placeholder_note

    prompts = pl.DataFrame(
        {
            "dataset": ["mine", "mine", "mine"],
            "prompt_id": ["0", "1", "2"],
            "prompt": [
                "Answer {question} briefly.",
                r"Fix \documentclass{article} and x^{n}.",
                "What is the capital of France?",
            ],
        }
    )
    note = _placeholder_note(prompts)
    assert "placeholder-like text" in note and ": 1: mine/0." in note
    assert "mine/1" not in note and "mine/2" not in note


def _marked(summary: pl.DataFrame, axis: str, p_reference: float, p_holm: float) -> pl.DataFrame:
    chosen = (pl.col("dataset") == "__pooled__") & (pl.col("axis") == axis)
    return summary.with_columns(
        pl.when(chosen).then(p_reference).otherwise(pl.col("p_reference")).alias("p_reference"),
        pl.when(chosen).then(p_holm).otherwise(pl.col("p_holm")).alias("p_holm"),
    )


def test_marks_follow_the_holm_p_the_page_names_and_never_the_raw_one() -> None:
    """An axis with a raw p of 0.03 and a Holm p of 0.14 got `*` (the marks read the raw
    p while the page named Holm); now it gets none, and an axis with Holm p 0.004 gets
    `**`. Both pages' legends say the marks read the Holm-adjusted p."""
    from sago_core.report.summary_md import render_summary

    deltas = _deltas()
    scores = score_prompts(deltas)
    summary = summarize(scores).with_columns(pl.lit(1.0).alias("p_holm"))
    summary = _marked(_marked(summary, "bleu", 0.03, 0.14), "prob", 0.001, 0.004)
    md = render_summary(summary)
    row = next(line for line in md.splitlines() if line.startswith("| bleu |"))
    assert "*" not in row
    row = next(line for line in md.splitlines() if line.startswith("| prob |"))
    assert row.rstrip(" |").endswith("**") and not row.rstrip(" |").endswith("***")
    assert "marks: Holm-adjusted p" in md
    variants = pl.DataFrame({"family": ["register"], "kept": [True]})
    prompts, generations = _answers()
    page = render_report(
        summary, scores, deltas, variants, prompts, generations, {"run_id": "r", "config": {}}
    )
    bleu = re.search(r'<td class="l">bleu</td><td>([^<]*)</td>', page)
    prob = re.search(r'<td class="l">prob</td><td>([^<]*)</td>', page)
    assert bleu is not None and not bleu.group(1).endswith("*")
    assert prob is not None and prob.group(1).endswith("**") and not prob.group(1).endswith("***")
    assert "marks: Holm-adjusted p" in page


def test_an_interval_from_too_few_prompts_shows_its_reason_never_a_band() -> None:
    """Three prompts: the summary's interval is missing with its reason, and the page
    prints the reason where the band would be (the old page printed a band from 2)."""
    from sago_core.statistics.intervals import interval_refusal

    deltas = _deltas().filter(
        (pl.col("dataset") == "d1") & pl.col("prompt_id").is_in(["d1-0", "d1-1", "d1-2"])
    )
    scores = score_prompts(deltas)
    summary = summarize(scores)
    measured = summary.filter(pl.col("sgs").is_not_null())
    assert measured["ci_low"].is_null().all() and measured["ci_high"].is_null().all()
    assert set(measured["ci_missing_reason"]) == {interval_refusal(3)}
    prompts, generations = _answers()
    page = render_report(
        summary,
        scores,
        deltas,
        pl.DataFrame({"family": ["register"], "kept": [True]}),
        prompts,
        generations,
        {"run_id": "r", "config": {}},
    )
    cell = re.search(r'<td class="l">bleu</td><td>[^<]*</td><td>(.*?)</td>', page)
    assert cell is not None and "3 prompt(s) with a value, fewer than 5" in cell.group(1)
    assert "[" not in cell.group(1)


def _peer_row(index: str, value: float | None, family: str = "__all__") -> dict:
    return {
        "model": "hf:m",
        "dataset": "__pooled__",
        "family": family,
        "index": index,
        "value": value,
        "n": 3 if value is not None else 0,
        "coverage": None,
        "source": "a paper",
        "missing_reason": None if value is not None else "NO_GOLD_ALPACA",
    }


def test_the_peer_indices_stand_beside_sgs_with_na_reasons() -> None:
    from sago_core.artifacts.schemas import PEER_METRICS

    deltas = _deltas()
    scores = score_prompts(deltas)
    summary = summarize(scores)
    prompts, generations = _answers()
    variants = pl.DataFrame({"family": ["register"], "kept": [True]})
    values = {"pss_correct": None, "pss_bertscore": 0.125, "posix": 0.5, "pdr": None}
    values |= {"max_p": None, "avg_p": None, "cps": None}
    rows = [_peer_row(i, v) for i, v in values.items()]
    rows += [_peer_row(i, v, "register") for i, v in values.items()]
    peer = pl.DataFrame(rows, schema=PEER_METRICS)
    page = render_report(
        summary, scores, deltas, variants, prompts, generations, {}, peer_metrics=peer
    )
    assert "<h2>Peer indices beside SGS</h2>" in page
    assert page.index("Pooled SGS per model and axis") < page.index("Peer indices beside SGS")
    assert page.index("Peer indices beside SGS") < page.index("<h2>Per dataset</h2>")
    sgs_bert = summary.filter(
        (pl.col("model") == "hf:m")
        & (pl.col("dataset") == "__pooled__")
        & (pl.col("axis") == "bert")
    )["sgs"][0]
    # model, PSS (correct) NA, PSS (BERTScore), SGS bert, POSIX, SGS prob, ...
    row = re.search(
        r'<td class="l">hf:m</td><td>(.*?)</td><td>([0-9.]+)</td><td>([0-9.]+)</td>', page
    )
    assert row is not None
    assert 'title="NO_GOLD_ALPACA"' in row.group(1)
    assert float(row.group(2)) == 0.125 and float(row.group(3)) == round(sgs_bert, 4)
    assert '<td class="l">register</td>' in page
    assert "PSS (correct) NA in 2 row(s): NO_GOLD_ALPACA" in page  # all, register
    plain = render_report(summary, scores, deltas, variants, prompts, generations, {})
    assert "Peer indices beside SGS" not in plain


def test_every_p_value_is_written_one_way() -> None:
    from sago_core.report.markup import p_value

    assert p_value(8.025e-16) == "&lt; 1e-4" and p_value(9.99e-5) == "&lt; 1e-4"
    assert p_value(1e-4) == "0.000100"
    assert p_value(0.012345) == "0.0123"
    assert p_value(0.5) == "0.500" and p_value(1.0) == "1.00"
    assert "NA" in p_value(None) and "NA" in p_value(float("nan"))
