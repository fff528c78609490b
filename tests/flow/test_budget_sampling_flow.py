"""A budgeted run at K = 4 samples per prompt text on the mock backend: it finishes, a cell
costs K generations, its cells' values are the excess deltas (the full K = 4 run's, cell for
cell, and minus the excess of its own sampling tests), its variance table splits prompt,
variant and sample as budget.json documents it, and at ``--budget 1.0`` its scores are the
full K = 4 run's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from sago_core.config import RunConfig, build_config
from tests.reliability.test_budget_resume import GRID  # 10 kinds in two strata

pytestmark = pytest.mark.slow

K = 4
QUESTIONS = [
    "What is the capital of France?",
    "Who wrote Hamlet?",
    "How many legs does a spider have?",
    "What gas do plants absorb?",
]
CELL = ["dataset", "prompt_id", "variant_id", "axis"]


def _config(tmp_path: Path, budget: dict[str, Any] | None) -> RunConfig:
    data = tmp_path / "questions.jsonl"
    data.write_text("".join(json.dumps({"question": q}) + "\n" for q in QUESTIONS))
    values: dict[str, Any] = {
        "models": ["mock:sampler"],
        "datasets": [str(data)],
        "n": len(QUESTIONS),
        "runs_dir": str(tmp_path / "runs"),
        "generation": {"max_new_tokens": 8, "batch_size": 16, "temperature": 0.7, "samples": K},
        "variants": GRID,
    }
    return build_config("demo", {**values, "budget": budget} if budget else values)


def _within(deltas: pl.DataFrame, axis: str) -> tuple[float, float]:
    """By hand, for one dataset: the variance of the prompts' roots over their asked cells,
    and the per-cell variance of d^2 / (2 s) within a prompt and subtype (the strata)."""
    cells = deltas.filter((pl.col("axis") == axis) & pl.col("delta_norm").is_finite())
    cells = cells.with_columns(
        s=(pl.col("delta_norm") ** 2).mean().over("prompt_id").sqrt()
    ).with_columns(z=pl.col("delta_norm") ** 2 / (2 * pl.col("s")))
    groups = cells.group_by("prompt_id", "subtype").agg(
        ss=((pl.col("z") - pl.col("z").mean()) ** 2).sum(), dof=pl.len() - 1
    )
    roots = cells.group_by("prompt_id").agg(pl.col("s").first())["s"].to_numpy()
    return float(np.var(roots, ddof=1)), float(groups["ss"].sum()) / float(groups["dof"].sum())


def test_a_budgeted_run_at_k_4_measures_excess_deltas(harness: None, tmp_path: Path) -> None:
    from sago.flows.evaluate import evaluate

    full = Path(evaluate(_config(tmp_path, None)))
    run = Path(evaluate(_config(tmp_path, {"fraction": 0.5, "rounds": 2})))
    record = json.loads((run / "budget.json").read_text())
    assert record["samples"] == K and record["cells"] < record["full_cells"]
    assert record["level"] == "position"  # spacing and capitalization: the hand strata below
    assert record["generations"] == (record["cells"] + 2 * record["prompts_sampled"]) * K
    assert f"x {K} samples ({record['generations']:,} generations)" in (
        run / "summary.md"
    ).read_text(encoding="utf-8")

    asked = pl.read_parquet(run / "budget_cells.parquet").filter("asked")
    key = ["dataset", "prompt_id", "variant_id"]
    last = run / "budget" / f"round-{record['rounds_run']}"
    (model_dir,) = (last / "models").iterdir()  # the round's sampling stages, in its folder
    assert (model_dir / "sampling_tests.parquet").is_file()
    deltas = pl.read_parquet(last / "deltas.parquet").join(asked.select(key), on=key)
    text = deltas.filter(pl.col("axis").is_in(["bleu", "bert", "mr"]))
    # the full K = 4 run's excess deltas, cell for cell
    theirs = pl.read_parquet(full / "deltas.parquet").select(*CELL, full="delta_norm")
    same = text.join(theirs, on=CELL)
    assert same.height == text.height > 0
    assert np.allclose(same["delta_norm"], same["full"], atol=1e-9, equal_nan=True)
    # and minus the excess of the run's own sampling tests on the text axes
    tests = pl.read_parquet(run / "sampling_tests.parquet").select(*CELL, "excess")
    bleu = deltas.filter(pl.col("axis") == "bleu").join(tests, on=CELL)
    assert bleu.height == asked.height
    assert np.allclose(bleu["delta_norm"], -bleu["excess"], rtol=0, atol=1e-12)

    components = pl.read_parquet(run / "variance_components.parquet")
    rows = {r["axis"]: r for r in record["variance"]}
    for axis in ("bleu", "bert"):
        row = rows[axis]
        assert min(row["prompt"], row["variant"], row["sample"]) >= 0, row
        pooled = components.filter((pl.col("dataset") == "__pooled__") & (pl.col("axis") == axis))
        s2_variant, s2_sample = pooled["s2_variant"][0], pooled["s2_sample"][0]
        share = (s2_sample / K) / (s2_variant + s2_sample / K)
        between, within = _within(deltas, axis)
        assert row["prompt"] == pytest.approx(between, rel=1e-9)
        assert row["variant"] + row["sample"] == pytest.approx(within, rel=1e-9)
        assert row["sample"] == pytest.approx(share * within, rel=1e-9)
    assert rows["prob"]["sample"] is None and "crossed" in rows["prob"]["sample_missing_reason"]
    # the mock never mirrors: MR has no spread within prompts, so no share, with its reason
    assert rows["mr"]["sample"] is None and "no variation" in rows["mr"]["sample_missing_reason"]

    # the whole grid at K = 4: the full run's scores
    whole = Path(evaluate(_config(tmp_path, {"fraction": 1.0})))
    scores = pl.read_parquet(whole / "scores.parquet").select("dataset", "prompt_id", "axis", "s")
    expected = pl.read_parquet(full / "scores.parquet").select(
        "dataset", "prompt_id", "axis", full="s"
    )
    joined = scores.join(expected, on=["dataset", "prompt_id", "axis"])
    assert joined.height == expected.height > 0
    assert np.allclose(joined["s"], joined["full"], rtol=1e-9, equal_nan=True)
