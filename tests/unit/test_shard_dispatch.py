"""The cut-and-deal plan as the flow uses it: the plan-shards task cuts each shard for the
workers that serve the model (``shard_workers``), the dispatcher deals a shard's parts to
different workers, and one worker gets the one-worker plan. The shards' task runs carry no
tags (each distinct set of tags costs a shard a Prefect concurrency lookup). Hand-built
cases; no timing."""

from __future__ import annotations

from pathlib import Path

import pytest

from sago.flows.runtime.dispatch import shard_workers
from sago.flows.shard import shard_places
from sago.tasks.prepare import plan_shards_task
from sago_core.artifacts.layout import RunLayout
from sago_core.artifacts.schemas import PROMPTS, VARIANTS
from sago_core.artifacts.store import write_parquet
from sago_core.config import OrchestrationSettings
from sago_core.stages.shards import assign_shards, read_shards
from tests.unit.test_shard_balance import prompts_of, variants_of


@pytest.mark.parametrize(
    ("visible", "devices", "per_worker", "workers"),
    [("0,1,2,3", 1, 1, 1), ("0,1,2,3", 2, 1, 2), ("0,1,2,3", 4, 2, 2), ("5,7", "auto", 1, 2)],
)
def test_shard_workers_counts_the_workers_that_serve_a_model(
    monkeypatch: pytest.MonkeyPatch, visible: str, devices: object, per_worker: int, workers: int
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    settings = OrchestrationSettings.model_validate(
        {"devices": devices, "devices_per_worker": per_worker}
    )
    assert shard_workers(settings) == workers


def _plan(tmp_path: Path, workers: int) -> str:
    prompts = prompts_of({"a": 5, "b": 2})
    variants = variants_of(prompts, 3)
    inputs = tmp_path / "inputs"
    return plan_shards_task.fn(
        prompts_path=str(write_parquet(prompts, inputs / "prompts.parquet", PROMPTS)),
        variants_path=str(write_parquet(variants, inputs / "variants.parquet", VARIANTS)),
        shard_size=4,
        out_dir=str(tmp_path / f"plan-{workers}"),
        workers=workers,
    )


def test_the_plan_is_cut_for_two_workers_and_each_shards_parts_go_apart(tmp_path: Path) -> None:
    shards = read_shards(_plan(tmp_path, workers=2))
    # a: prompts 0-3 in two parts, prompt 4 alone; b: prompts 0-1 in two parts
    assert [(s.label, s.part_of) for s in shards] == [
        ("a-0000-0001", "a-0000-0003"),
        ("a-0002-0003", "a-0000-0003"),
        ("a-0004-0004", "a-0004-0004"),
        ("b-0000-0000", "b-0000-0001"),
        ("b-0001-0001", "b-0000-0001"),
    ]
    groups = assign_shards(shards, 2, max_new_tokens=20)
    assert len(groups) == 2
    for whole in ("a-0000-0003", "b-0000-0001"):
        holders = [i for i, g in enumerate(groups) for s in g if s.part_of == whole]
        assert sorted(holders) == [0, 1]
    assert sorted(s.label for g in groups for s in g) == sorted(s.label for s in shards)


def test_one_worker_gets_the_one_worker_plan(tmp_path: Path) -> None:
    shards = read_shards(_plan(tmp_path, workers=1))
    assert [(s.label, s.part_of) for s in shards] == [
        ("a-0000-0003", "a-0000-0003"),
        ("a-0004-0004", "a-0004-0004"),
        ("b-0000-0001", "b-0000-0001"),
    ]


def test_a_shards_task_runs_carry_no_tags(tmp_path: Path) -> None:
    shard = read_shards(_plan(tmp_path, workers=1))[0]
    where, _, tags = shard_places(RunLayout(tmp_path / "run"), "mock:m", shard)
    assert tags == []
    assert where.endswith(shard.label)
