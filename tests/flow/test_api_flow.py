"""One run over an open model (transformers) and an API model (LiteLLM, local server), with
the register judge: missing axes stay missing, the judge decides register MR, nothing is
asked twice, the judge audit round-trips."""

from __future__ import annotations

import csv
from pathlib import Path

import polars as pl
import pytest

from sago_core.config import RunConfig, build_config
from tests.grids import tiny_variants
from tests.openai_server import ScriptedServer

pytestmark = pytest.mark.slow

API_MODEL = "litellm:openai/mock-1"
JUDGE = "litellm:openai/judge-1"


def _config(tiny: Path, runs: Path, base_url: str) -> RunConfig:
    return build_config(
        "demo",
        {
            "models": [f"hf:{tiny}", API_MODEL],
            "n": 2,
            "runs_dir": str(runs),
            "generation": {"max_new_tokens": 6, "batch_size": 16},
            "api": {"base_url": base_url, "key_env": "SAGO_TEST_API_KEY", "backoff_s": 0},
            "judge": {"model": JUDGE},
            "variants": tiny_variants(),
        },
    )


def test_open_and_api_models_in_one_report_with_the_judge(
    harness: None, tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sago.flows.evaluate import evaluate
    from sago_cli.main import main

    monkeypatch.setenv("SAGO_TEST_API_KEY", "sk-canary-0123456789")
    with ScriptedServer() as server:
        config = _config(tiny_model_dir, tmp_path / "runs", server.base_url)
        run_dir = Path(evaluate(config))
        first_calls = server.total_calls()
        deltas = pl.read_parquet(run_dir / "deltas.parquet").filter(
            (pl.col("model") == API_MODEL) & (pl.col("family") != "replay")
        )
        for axis in ("act", "prob", "ent"):
            gaps = deltas.filter(pl.col("axis") == axis)
            assert gaps["delta"].null_count() == gaps.height > 0
            assert all("API models" in r for r in gaps["missing_reason"].to_list())
        for axis in ("bleu", "bert", "mr"):
            assert deltas.filter(pl.col("axis") == axis)["delta"].null_count() == 0, axis
        mirroring = pl.concat(
            [pl.read_parquet(p) for p in run_dir.glob("models/*/mirroring.parquet")]
        )
        judged = mirroring.filter(pl.col("detector").str.starts_with("judge:"))
        assert judged.height == 2 * 12 * 2  # models x prompts (2 per style) x register variants
        assert judged["m_variant"].null_count() == 0
        # politer variants end in "please": the mock model thanks back and the judge sees it
        politer = judged.filter(
            (pl.col("model") == API_MODEL) & pl.col("variant_id").str.contains(r"\+2")
        )
        assert politer["m_variant"].to_list() == [1] * 12
        summary = pl.read_parquet(run_dir / "summary.parquet")
        act = summary.filter((pl.col("model") == API_MODEL) & (pl.col("axis") == "act"))
        assert act["sgs"].null_count() == act.height
        page = (run_dir / "report.html").read_text()
        assert "API models return no hidden states" in page and "mock-1" in page

        again = Path(evaluate(config))
        assert again == run_dir and server.total_calls() == first_calls  # all cached

    for artifact in run_dir.rglob("*"):
        if artifact.is_file():
            assert b"sk-canary-0123456789" not in artifact.read_bytes(), artifact

    sample = tmp_path / "audit.csv"
    export = ["judge-audit", "export", str(run_dir), "--out", str(sample)]
    assert main(export) == 0
    rows = list(csv.DictReader(sample.open()))
    assert len(rows) == 5 and all(r["human_label"] == "" for r in rows)  # 10% of 48
    assert "m_variant" not in rows[0]  # blind: no verdicts in the file
    verdicts = {pid: v for pid, v in _judged(run_dir).select("pair_id", "m_variant").iter_rows()}
    for i, row in enumerate(rows):  # a labeller who agrees with the judge except once
        row["human_label"] = str(verdicts[row["pair_id"]] if i else 1 - verdicts[row["pair_id"]])
    labelled = tmp_path / "labelled.csv"
    with labelled.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert main(["judge-audit", "score", str(run_dir), "--labels", str(labelled)]) == 0
    from sago_core.report.judge_audit import score_labels

    scored = score_labels(run_dir, labelled)
    assert scored["labelled"] == 5 and scored["human_vs_judge"]["percent"] == 80.0
    assert scored["judge_vs_offline"]["n"] == 5


def _judged(run_dir: Path) -> pl.DataFrame:
    from sago_core.report.judge_audit import judged_pairs

    return judged_pairs(run_dir)
