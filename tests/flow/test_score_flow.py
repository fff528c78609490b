"""`sago score` end to end: the round trip (a finished run of a tiny random-weight model
exported to the input schema and scored again with the same model reproduces its deltas and
summary; its empty answers read back as answers), lm-evaluation-harness and inspect_ai logs
with three templates per item scored to a report, and a score without a model (Act/Prob/Ent
missing with the reason)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from sago_core.config import RunConfig, build_config
from tests.grids import tiny_variants

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "external"
PUNCTUATION = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "reference"
    / "closed_models"
    / "run_gemini_2_5_flash_trivia_qa_punctuation_20260501_031700"
    / "full_results_all_models.csv"
)
KEY = ["model", "dataset", "prompt_id", "variant_id", "axis"]
EXACT = ("bleu", "bert", "mr")
MODEL_AXES = ("act", "prob", "ent")


def _config(runs: Path, model: str = "hf:smollm2-135m") -> RunConfig:
    return build_config(
        "demo",
        {
            "models": [model],
            "datasets": ["builtin"],
            "n": 2,
            "runs_dir": str(runs),
            "generation": {"max_new_tokens": 8},
            "variants": tiny_variants(),
        },
    )


@pytest.fixture(scope="module")
def tiny_model(tiny_model_dir: Path) -> str:
    return f"hf:{tiny_model_dir}"


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory, harness: None, tiny_model: str) -> Path:
    from sago.flows.evaluate import evaluate

    runs = tmp_path_factory.mktemp("runs")
    return Path(evaluate(_config(runs, tiny_model)))


@pytest.mark.parametrize("suffix", [".csv"])
def test_round_trip_reproduces_the_run(
    finished_run: Path, tiny_model: str, tmp_path: Path, suffix: str
) -> None:
    from sago.flows.score import score
    from sago_core.external.export import export_run
    from sago_core.external.options import ExternalSource

    exported = export_run(finished_run, tmp_path / f"run{suffix}")
    config = _config(tmp_path / "runs", tiny_model)
    scored = Path(score(ExternalSource(path=exported, model=tiny_model), config))
    assert scored != finished_run
    for name in (
        "generations.parquet",
        "deltas.parquet",
        "scores.parquet",
        "summary.parquet",
        "summary.md",
        "report.html",
        "manifest.json",
    ):
        assert (scored / name).is_file(), name
    before = pl.read_parquet(finished_run / "deltas.parquet").sort(KEY)
    after = pl.read_parquet(scored / "deltas.parquet").sort(KEY)
    assert before.select(KEY).equals(after.select(KEY))
    assert before["missing_reason"].to_list() == after["missing_reason"].to_list()
    exact_b = before.filter(pl.col("axis").is_in(EXACT))["delta"].to_list()
    exact_a = after.filter(pl.col("axis").is_in(EXACT))["delta"].to_list()
    assert exact_b == exact_a  # bit for bit
    # float32 sums over the answer's tokens in other batches (the run scored per shard):
    # equal to ~1e-8 of each axis' scale R, far below any real difference
    model_b = before.filter(pl.col("axis").is_in(MODEL_AXES))["delta_norm"].to_numpy()
    model_a = after.filter(pl.col("axis").is_in(MODEL_AXES))["delta_norm"].to_numpy()
    assert model_b.size and not np.isnan(model_b).any()
    np.testing.assert_allclose(model_a, model_b, rtol=1e-5, atol=1e-6)
    summary_b = pl.read_parquet(finished_run / "summary.parquet").sort("model", "dataset", "axis")
    summary_a = pl.read_parquet(scored / "summary.parquet").sort("model", "dataset", "axis")
    assert summary_b.select("model", "dataset", "axis", "n").equals(
        summary_a.select("model", "dataset", "axis", "n")
    )
    np.testing.assert_allclose(summary_a["sgs"].to_numpy(), summary_b["sgs"].to_numpy(), atol=1e-6)
    np.testing.assert_allclose(
        summary_a["p_reference"].to_numpy(), summary_b["p_reference"].to_numpy(), atol=1e-5
    )
    manifest = json.loads((scored / "manifest.json").read_text())
    assert manifest["external"]["notes"]["format"] == "generations"


def test_without_a_model_the_model_axes_are_missing(tmp_path: Path, harness: None) -> None:
    from sago.flows.score import score
    from sago_core.external.frames import NO_MODEL
    from sago_core.external.options import ExternalSource
    from sago_core.external.schema import EMPTY_RESPONSE

    config = _config(tmp_path / "runs")
    source = ExternalSource(path=FIXTURES / "generations.csv")
    run_dir = Path(score(source, config))
    deltas = pl.read_parquet(run_dir / "deltas.parquet")
    model_axes = deltas.filter(pl.col("axis").is_in(MODEL_AXES))
    assert model_axes["delta"].null_count() == model_axes.height > 0
    failed = f"variant answer failed: {EMPTY_RESPONSE}"
    assert set(model_axes["missing_reason"]) == {NO_MODEL, failed}
    # the empty response (p2, register:-2:suffix) is missing on every axis, never scored
    empty = deltas.filter(
        (pl.col("prompt_id") == "p2") & (pl.col("variant_id") == "register:-2:suffix")
    )
    assert empty.height == 6 and empty["delta"].null_count() == 6
    assert set(empty["missing_reason"]) == {failed}
    bleu = deltas.filter(pl.col("axis") == "bleu")
    assert bleu["delta"].null_count() < bleu.height
    report = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "External generations:" in report and "generations.csv" in report
    again = Path(score(source, config))  # a rerun: every stage a cache hit
    stages = json.loads((again / "manifest.json").read_text())["stages"]
    assert all(s["cache_hit"] for s in stages)


def test_reference_csv_scores_each_row_against_its_own_base(tmp_path: Path, harness: None) -> None:
    from sago.flows.score import score
    from sago_core.external.options import ExternalSource

    source = ExternalSource(path=FIXTURES / "politeness" / "results.csv")
    run_dir = Path(score(source, _config(tmp_path / "runs")))
    deltas = pl.read_parquet(run_dir / "deltas.parquet")
    bleu = {
        (r["prompt_id"], r["variant_id"]): r["delta"]
        for r in deltas.filter(pl.col("axis") == "bleu").iter_rows(named=True)
    }
    # the base asked again repeats its base answer word for word: BLEU 100, delta 0
    assert bleu[("1", "replay:base:1:global")] == 0.0
    # "They pass through." against the base answer asked on its own row
    assert bleu[("0", "register:-2:prefix")] < -50 and bleu[("0", "register:-4:suffix")] < -50
    # one prompt, one unit: its other base answers are base samples, not prompts
    assert set(pl.read_parquet(run_dir / "scores.parquet")["prompt_id"]) == {"0", "1", "2"}
    report = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "prompts whose base answers differ: 1" in report


@pytest.mark.parametrize(
    ("fixture", "fmt", "prefix"),
    [
        ("lmeval/generate.jsonl", "lm-eval", "lm-eval:"),
        ("inspect/templates.json", "inspect", "inspect:"),
    ],
)
def test_other_harnesses_logs_with_three_templates_score_to_a_report(
    fixture: str, fmt: str, prefix: str, tmp_path: Path, harness: None
) -> None:
    """An lm-evaluation-harness sample log and an inspect_ai log, three templates per item
    (the first the base): variants per template, text axes scored, model axes missing."""
    from sago.flows.score import score
    from sago_core.external.frames import NO_MODEL
    from sago_core.external.options import ExternalSource

    source = ExternalSource(path=FIXTURES / fixture, format=fmt, family="structural")
    run_dir = Path(score(source, _config(tmp_path / "runs")))
    deltas = pl.read_parquet(run_dir / "deltas.parquet")
    templates = {v for v in deltas["variant_id"].unique().to_list() if v.startswith(prefix)}
    assert len(templates) == 2  # three templates: the base and two variants
    bleu = deltas.filter(pl.col("axis") == "bleu")
    assert bleu.height > 0 and bleu["delta"].null_count() < bleu.height
    model_axes = deltas.filter(pl.col("axis").is_in(MODEL_AXES))
    assert model_axes["delta"].null_count() == model_axes.height > 0
    assert NO_MODEL in set(model_axes["missing_reason"])
    report = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "External generations:" in report and Path(fixture).name in report


def _api_results(path: Path, model: str, prompts: set[str], changed: bool = False) -> Path:
    """Rows of the reference's Gemini punctuation CSV for ``prompts``, answered by ``model``
    (``changed``: every other variant answers as its base did, another model's answers)."""
    with PUNCTUATION.open(encoding="utf-8", newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if r["prompt_id"] in prompts]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        for i, row in enumerate(rows):
            answer = row["response_orig"] if changed and i % 2 else row["response_pert"]
            writer.writerow({**row, "model": model, "response_pert": answer})
    return path


def test_runs_scored_from_an_api_models_csv_go_wherever_runs_go(
    tmp_path: Path, harness: None
) -> None:
    """Runs whose models are API models' names (no BACKEND:ID): the results site builds over
    them and shows them by name, compare (page and paired) and the card take them, and no
    page of the site holds a path of this machine (the site is made to be published)."""
    from sago.flows.score import score
    from sago_core.external.options import ExternalSource
    from sago_core.report.card.build import write_card
    from sago_core.report.compare.page import compare_runs
    from sago_core.report.compare.paired import render_paired
    from sago_core.site.build import build_site
    from sago_core.statistics.paired_runs import compare_paired

    first, other = {"0", "1", "2", "3"}, {"4", "5", "6", "7"}
    inputs = tmp_path / "inputs"
    files = {
        "flash": _api_results(inputs / "flash.csv", "gemini-2.5-flash", first),
        "pro": _api_results(inputs / "pro.csv", "gemini-2.5-pro", first, changed=True),
        "flash-later": _api_results(inputs / "later.csv", "gemini-2.5-flash", other),
    }
    runs = tmp_path / "runs"
    folders = {}
    for run_id, path in files.items():
        config = _config(runs).model_copy(update={"run_id": run_id})
        source = ExternalSource(path=path, family="noise", subtype="punctuation")
        folders[run_id] = Path(score(source, config))
    flash, pro = folders["flash"], folders["pro"]
    comparison = compare_paired(flash, pro, 0.02)
    assert set(comparison.table["model_a"]) == {"gemini-2.5-flash"}
    assert set(comparison.table["model_b"]) == {"gemini-2.5-pro"}
    text_axes = comparison.table.filter(pl.col("axis").is_in(EXACT))
    assert text_axes.height > 0 and set(text_axes["n"]) == {4}  # one unit per prompt
    assert "gemini-2.5-pro" in render_paired(comparison)
    assert "gemini-2.5-pro" in compare_runs([flash, pro])
    write_card(pro, flash)
    card = (pro / "card.md").read_text(encoding="utf-8")
    assert "gemini-2.5-pro, known by its name only" in card

    index = build_site(runs, tmp_path / "site")
    pages = [p for p in index.parent.rglob("*") if p.suffix in {".html", ".json"}]
    text = index.read_text(encoding="utf-8")
    assert "gemini-2.5-flash" in text and "gemini-2.5-pro" in text
    for run_id in folders:
        assert (index.parent / "runs" / run_id / "index.html").is_file(), run_id
    # the later flash run asks other prompts: its own line, with the reason, by run id
    assert "Not joined to line 1" in text and "flash-later/scores.parquet" in text
    leaked = [p.name for p in pages if str(tmp_path) in p.read_text(encoding="utf-8")]
    assert not leaked
