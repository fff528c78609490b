"""The evaluate flow on a tiny random model under Prefect: contract, caching, resume."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from sago_core.config import RunConfig, build_config
from sago_core.vocabulary import AXES
from tests.grids import tiny_variants

pytestmark = pytest.mark.slow

CONTRACT = {
    "generations.parquet": [
        "model",
        "dataset",
        "prompt_id",
        "variant_id",
        "family",
        "subtype",
        "strength",
        "position",
        "prompt_text",
        "response_text",
    ],
    "deltas.parquet": [
        "model",
        "dataset",
        "prompt_id",
        "variant_id",
        "family",
        "subtype",
        "strength",
        "position",
        "axis",
        "delta",
        "delta_norm",
        "missing_reason",
    ],
    "scores.parquet": ["model", "dataset", "prompt_id", "axis", "s", "n_variants"],
    # beyond the mean
    "instances.parquet": ["model", "dataset", "prompt_id", "variant_id", "family", "subtype"],
    "tails.parquet": ["model", "dataset", "axis", "family", "n", "q50", "q90", "q99", "max"],
    "axis_structure.parquet": ["model", "axis_a", "axis_b", "spearman_rho", "p_value"],
    "axis_pca.parquet": ["model", "pca_component", "pca_variance_explained", "axis"],
    # peer indices
    "peer_metrics.parquet": ["model", "dataset", "family", "index", "value", "n"],
    "summary.parquet": [
        "model",
        "dataset",
        "axis",
        "sgs",
        "n",
        "t_stat",
        "p_eps_0_01",
        "p_eps_0_05",
        "p_eps_0_10",
    ],
}


def _config(model_dir: Path, runs: Path) -> RunConfig:
    return build_config(
        "demo",
        {
            "models": [f"hf:{model_dir}"],
            "n": 2,
            "runs_dir": str(runs),
            "generation": {"max_new_tokens": 4, "batch_size": 16},
            "variants": tiny_variants(
                structural={
                    "lengths": [2.0],
                    "mood": True,
                    "rewriter": f"hf:{model_dir}",
                    "max_new_tokens": 12,
                }
            ),
        },
    )


def _stages(run_dir: Path) -> dict[str, bool]:
    manifest = json.loads((run_dir / "manifest.json").read_text())
    return {s["path"]: s["cache_hit"] for s in manifest["stages"]}


@pytest.fixture(scope="module")
def first_run(
    harness: None, tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[RunConfig, Path]:
    """One run of the flow that the tests below share (each full run costs a model's
    generations and rewrites): the contract test reruns it, the vanished-artifact test
    deletes and recomputes one artifact of it, the browser test opens its report."""
    from sago.flows.evaluate import evaluate

    runs = tmp_path_factory.mktemp("evaluate") / "runs"
    config = _config(tiny_model_dir, runs)
    run_dir = Path(evaluate(config))
    assert run_dir == (runs / config.resolved_run_id()).resolve()
    return config, run_dir


def test_flow_writes_the_contract_and_a_rerun_recomputes_nothing(
    first_run: tuple[RunConfig, Path], tiny_model_dir: Path
) -> None:
    from sago.flows.evaluate import evaluate

    config, run_dir = first_run
    for name, columns in CONTRACT.items():
        frame = pl.read_parquet(run_dir / name)
        assert frame.columns[: len(columns)] == columns, name
    deltas = pl.read_parquet(run_dir / "deltas.parquet")
    assert set(deltas["axis"]) == set(AXES)
    variant_deltas = deltas.filter(pl.col("family") != "replay")
    assert variant_deltas["delta"].null_count() == 0, "all six axes are filled for an open model"
    floor = deltas.filter((pl.col("family") == "replay") & (pl.col("axis") != "mr"))
    assert floor.height == 12 * 5 and floor["delta"].null_count() == 0
    generations = pl.read_parquet(run_dir / "generations.parquet")
    assert (generations["variant_id"] == "base").sum() == 12  # two per built-in style
    variants = pl.read_parquet(run_dir / "variants.parquet")
    assert set(variants["family"]) == {"register", "noise", "structural", "replay"}
    assert variants.filter(pl.col("family") == "structural").height == 12 * 2
    assert variants.filter(~pl.col("kept"))["reject_reason"].null_count() == 0
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["config_hash"] == config.result_hash()
    assert manifest["models"][f"hf:{tiny_model_dir}"]["identity"].startswith("dir-sha256:")
    assert manifest["packages"]["prefect"] != "not installed"
    assert all("seconds" in s and "sha256" in s for s in manifest["stages"])
    assert not any(_stages(run_dir).values())
    assert (run_dir / "summary.md").read_text().startswith("# SAGO summary")
    report = (run_dir / "report.html").read_text()
    assert report.count("data:image/png;base64,") == 7
    summary = pl.read_parquet(run_dir / "summary.parquet")
    pooled = summary.filter(pl.col("dataset") == "__pooled__")
    assert pooled["ci_low"].null_count() == 0 and pooled["p_holm"].null_count() == 0
    assert (pooled["ci_low"] <= pooled["sgs"]).all() and (pooled["sgs"] <= pooled["ci_high"]).all()
    assert (pooled["p_holm"] >= pooled["p_eps_0_05"]).all()

    summary_bytes = (run_dir / "summary.parquet").read_bytes()
    evaluate(config)
    assert all(_stages(run_dir).values()), "every stage is a cache hit on rerun"
    assert (run_dir / "summary.parquet").read_bytes() == summary_bytes


def test_a_failed_run_resumes_without_recomputing_finished_stages(
    harness: None, tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sago.flows.evaluate import evaluate
    from sago_core.backends.mock import FAIL_ENV, MockBackendFailure

    config = _config(tiny_model_dir, tmp_path / "runs")
    config = config.model_copy(update={"models": ("mock:falls-over",)})
    with monkeypatch.context() as patch:
        patch.setenv(FAIL_ENV, "*")  # every generation fails
        with pytest.raises(MockBackendFailure, match="fell over"):
            evaluate(config)
    run_dir = tmp_path / "runs" / config.resolved_run_id()
    assert (run_dir / "variants.parquet").exists()
    assert not (run_dir / "summary.parquet").exists()
    assert not list(run_dir.rglob("*.tmp")), "no partial artifact is left behind"

    evaluate(config)
    stages = _stages(run_dir)
    assert stages["prompts.parquet"] and stages["variants.parquet"]
    assert stages["stages/variant_candidates.parquet"]
    assert not stages[
        next(p for p in stages if p.endswith("generations.parquet") and "models" in p)
    ]
    assert (run_dir / "summary.parquet").exists()


def test_a_vanished_artifact_is_recomputed_not_handed_on(
    first_run: tuple[RunConfig, Path],
) -> None:
    from sago.flows.evaluate import evaluate

    config, run_dir = first_run
    (run_dir / "scores.parquet").unlink()
    evaluate(config)
    stages = _stages(run_dir)
    assert stages["scores.parquet"] is False and stages["prompts.parquet"] is True
    assert (run_dir / "scores.parquet").exists()


def test_report_opens_in_headless_chromium_with_every_figure_and_true_tables(
    first_run: tuple[RunConfig, Path], tmp_path: Path
) -> None:
    """The run's report.html in a real browser: every figure decodes, the screenshot is not
    blank, and the pooled table equals SGS recomputed from deltas.parquet."""
    import re

    import numpy as np
    from PIL import Image

    from tests.browser import figures_as_loaded, screenshot

    _, run_dir = first_run
    page = run_dir / "report.html"
    figures = figures_as_loaded(page, tmp_path)
    assert [f[0] for f in figures] == [  # the story's figures first
        "fig-sgs-intervals",
        "fig-dose-response",
        "fig-heatmap",
        "fig-worst-instances",
        "fig-radar",
        "fig-distributions",
        "fig-layer-curves",
    ]
    assert all(complete and width > 100 and height > 100 for _, complete, width, height in figures)
    shot = np.asarray(Image.open(screenshot(page, tmp_path / "report.png", tmp_path)).convert("L"))
    assert shot.shape[0] > 1000 and shot.std() > 10  # text, tables and figures drawn

    deltas = pl.read_parquet(run_dir / "deltas.parquet").filter(pl.col("family") != "replay")
    text = page.read_text()
    for axis in AXES:
        per_prompt = (
            deltas.filter(pl.col("axis") == axis)
            .group_by("dataset", "prompt_id")
            .agg((pl.col("delta_norm") ** 2).mean().sqrt().alias("s"))
        )
        pooled = per_prompt.group_by("dataset").agg(pl.col("s").mean())["s"].mean()
        cell = re.search(rf'<td class="l">{axis}</td><td>([0-9.]+)', text)
        assert cell is not None and float(cell.group(1)) == pytest.approx(pooled, abs=6e-5)


def test_posix_matrix_on_adds_the_matrix_and_recomputes_only_what_reads_it(
    first_run: tuple[RunConfig, Path],
) -> None:
    """POSIX's full matrix, turned on for the finished run: the same run
    folder, the matrix per shard and per model, the peer indices and the report recomputed,
    every other stage a cache hit; ``posix`` is the paper's, ``posix_base_column`` beside."""
    from sago.flows.evaluate import evaluate
    from sago_core.config import PosixMatrixSettings

    config, run_dir = first_run
    on = config.model_copy(update={"posix_matrix": PosixMatrixSettings(max_prompts=3)})
    assert on.resolved_run_id() == config.resolved_run_id()
    prompts = (run_dir / "prompts.parquet").read_bytes()
    evaluate(on)
    recomputed = {path for path, hit in _stages(run_dir).items() if not hit}
    assert recomputed, "the matrix was computed"
    # load-prompts reads the whole config (so does the report's provenance): it reruns and
    # writes the same bytes, so every stage after it is a cache hit
    reads_it = ("posix_matrix.parquet", "peer_metrics.parquet", "report.html", "prompts.parquet")
    assert [path for path in recomputed if not path.endswith(reads_it)] == []
    assert (run_dir / "prompts.parquet").read_bytes() == prompts
    (matrix_file,) = run_dir.glob("models/*/posix_matrix.parquet")
    matrix = pl.read_parquet(matrix_file)
    sizes = matrix.group_by("dataset", "prompt_id").len()
    assert sizes.height == 12 and set(sizes["len"].to_list()) == {9}  # 3 x 3 per instance
    assert matrix["logprob"].null_count() == 0
    peer = pl.read_parquet(run_dir / "peer_metrics.parquet").filter(
        (pl.col("dataset") == "__pooled__") & (pl.col("family") == "__all__")
    )
    rows = {r["index"]: r for r in peer.iter_rows(named=True)}
    assert rows["posix"]["value"] is not None and rows["posix"]["n"] == 12
    assert "12 of 12 instances had more prompt texts than the cap (3)" in rows["posix"]["coverage"]
    assert rows["posix_base_column"]["value"] is not None
