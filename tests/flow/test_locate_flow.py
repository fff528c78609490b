"""Where the instability sits, through the evaluate flow on a tiny random model: patching turned
on for a finished run computes only the new stages, writes both artifacts, and the report shows
the three figures of the where-the-instability-sits section."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from sago_core.config import RunConfig, build_config
from tests.grids import tiny_variants

pytestmark = pytest.mark.slow


def _config(model_dir: Path, runs: Path, patching: dict[str, object] | None) -> RunConfig:
    values: dict[str, object] = {
        "models": [f"hf:{model_dir}"],
        "n": 1,
        "runs_dir": str(runs),
        "generation": {"max_new_tokens": 4, "batch_size": 16},
        "variants": tiny_variants(),
    }
    if patching is not None:
        values["analysis"] = {"patching": patching}
    return build_config("demo", values)


def _stages(run_dir: Path) -> dict[str, bool]:
    manifest = json.loads((run_dir / "manifest.json").read_text())
    return {s["path"]: s["cache_hit"] for s in manifest["stages"]}


def test_patching_added_to_a_finished_run(
    harness: None, tiny_model_dir: Path, tmp_path: Path
) -> None:
    from sago.flows.evaluate import evaluate

    plain = _config(tiny_model_dir, tmp_path / "runs", None)
    run_dir = Path(evaluate(plain))
    assert (run_dir / "layer_profiles.parquet").exists()
    assert not (run_dir / "patching.parquet").exists()
    report = (run_dir / "report.html").read_text()
    assert "fig-patching-recovery" not in report and "fig-layer-profiles" not in report

    located = _config(tiny_model_dir, tmp_path / "runs", {"layers": "all", "max_variants": 6})
    assert Path(evaluate(located)) == run_dir  # the same run folder
    stages = _stages(run_dir)
    fresh = sorted(p for p, hit in stages.items() if not hit)
    assert all(hit for p, hit in stages.items() if "generations" in p or "analysis" in p)
    assert any(p.endswith("patching.parquet") and p.startswith("models/") for p in fresh)
    assert "patching.parquet" in fresh and "report.html" in fresh
    assert "layer_profiles.parquet" not in fresh  # cached from the first run

    patching = pl.read_parquet(run_dir / "patching.parquet")
    assert patching.columns[:9] == [
        "model",
        "dataset",
        "prompt_id",
        "variant_id",
        "family",
        "subtype",
        "strength",
        "layer",
        "recovery",
    ]
    assert patching.select("dataset", "prompt_id", "variant_id").n_unique() == 6
    assert set(patching["family"]) == {"register", "noise"}  # stratified, replay never
    assert sorted(set(patching["layer"])) == [1, 2, 3]
    assert patching.height == 6 * 3
    missing = patching.filter(pl.col("recovery").is_null())
    assert missing["missing_reason"].null_count() == 0
    last = patching.filter(pl.col("layer") == 3)
    assert last["kl_first_token"].max() < 1e-6

    profiles = pl.read_parquet(run_dir / "layer_profiles.parquet")
    assert set(profiles["read_position"]) == {"generation_start", "prompt_end"}
    assert set(profiles["layer"]) == {1, 2, 3}
    report = (run_dir / "report.html").read_text()
    for figure in ("fig-layer-profiles", "fig-layer-profiles-strength", "fig-patching-recovery"):
        assert f'id="{figure}"' in report
    assert report.count("data:image/png;base64,") == 7 + 3

    from sago_core.report.page.html import report_from_run

    rebuilt = report_from_run(run_dir)
    assert 'id="fig-patching-recovery"' in rebuilt
