"""Tasks as plain functions (``.fn``) on tiny Parquet files, and their cache keys."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import polars as pl

from sago.tasks.caching import code_version, module_closure, source_digest, stage_cache_key
from sago.tasks.metrics import assemble_task, score_prompts_task, summarize_task
from sago_core.artifacts.schemas import DELTAS
from sago_core.artifacts.store import write_parquet
from sago_core.config import GenerationSettings


def _deltas(path: Path, model: str) -> str:
    frame = pl.DataFrame(
        {
            "model": model,
            "dataset": "d",
            "prompt_id": ["p1", "p1", "p2", "p2"],
            "variant_id": ["a", "b", "a", "b"],
            "family": "noise",
            "subtype": "spacing",
            "strength": 5.0,
            "position": "global",
            "axis": "bleu",
            "delta": [-10.0, -30.0, 0.0, -20.0],
            "delta_norm": [-0.1, -0.3, 0.0, -0.2],
            "missing_reason": None,
        }
    )
    return str(write_parquet(frame, path, DELTAS))


def test_score_and_summarize_tasks_write_their_artifacts(tmp_path: Path) -> None:
    a = _deltas(tmp_path / "a.parquet", "m1")
    b = _deltas(tmp_path / "b.parquet", "m2")
    merged = assemble_task.fn(
        name="deltas", part_paths=[a, b], schema_name="DELTAS", out_dir=str(tmp_path)
    )
    assert pl.read_parquet(merged).height == 8
    scores = pl.read_parquet(score_prompts_task.fn(deltas_path=merged, out_dir=str(tmp_path)))
    assert scores.height == 4
    p1 = scores.filter((pl.col("model") == "m1") & (pl.col("prompt_id") == "p1"))["s"][0]
    assert abs(p1 - ((0.01 + 0.09) / 2) ** 0.5) < 1e-12
    summary = pl.read_parquet(
        summarize_task.fn(
            scores_path=str(tmp_path / "scores.parquet"),
            test_against="eps",
            out_dir=str(tmp_path),
        )
    )
    assert set(summary["dataset"]) == {"d", "__pooled__"}
    assert not list(tmp_path.glob(".*.tmp"))


def test_cache_key_follows_content_not_location_or_run(tmp_path: Path) -> None:
    context = SimpleNamespace(task=SimpleNamespace(name="score-prompts", fn=score_prompts_task.fn))
    a = _deltas(tmp_path / "a.parquet", "m1")
    copy = tmp_path / "elsewhere" / "a.parquet"
    copy.parent.mkdir()
    copy.write_bytes(Path(a).read_bytes())
    run_x, run_y = tmp_path / "run-x", tmp_path / "run-y"  # the same place in two runs
    key = stage_cache_key(context, {"deltas_path": a, "out_dir": str(run_x)}, run_x)
    assert key == stage_cache_key(context, {"deltas_path": str(copy), "out_dir": str(run_y)}, run_y)
    changed = _deltas(tmp_path / "b.parquet", "m2")
    assert key != stage_cache_key(context, {"deltas_path": changed, "out_dir": str(run_x)}, run_x)
    elsewhere = {"deltas_path": a, "out_dir": str(run_x / "models")}  # another output place
    assert key != stage_cache_key(context, elsewhere, run_x)
    gen = {"settings": GenerationSettings(max_new_tokens=8)}
    other = {"settings": GenerationSettings(max_new_tokens=9)}
    assert stage_cache_key(context, gen) != stage_cache_key(context, other)


def test_code_version_follows_code_not_comments_or_docstrings() -> None:
    plain = ast.parse("def f(x):\n    return x + 1\n")
    documented = ast.parse('def f(x):\n    """Add one."""\n    # why\n    return x + 1\n')
    changed = ast.parse("def f(x):\n    return x + 2\n")
    assert source_digest(plain) == source_digest(documented)
    assert source_digest(plain) != source_digest(changed)


def test_each_task_module_depends_only_on_what_it_imports() -> None:
    models = module_closure("sago.tasks.models")
    assert {"sago_core.backends.hf", "sago_core.stages.generation"} <= models
    assert "sago_core.scoring.summary" not in models
    metrics = module_closure("sago.tasks.metrics")
    assert "sago_core.scoring.summary" in metrics and "sago_core.backends.hf" not in metrics
    assert code_version("sago.tasks.models") != code_version("sago.tasks.metrics")
