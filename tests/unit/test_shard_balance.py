"""The shard plan with several workers: one-worker cuts unchanged, every
shard cut into one even part per worker and its parts dealt to different workers, the
estimated load per worker close to the mean. Hand-computed cases; no timing."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from sago_core.stages.shards import (
    Shard,
    assign_shards,
    deal,
    even_parts,
    plan_pieces,
    prompt_loads,
    read_shards,
    shard_load,
    write_shards,
)


def prompts_of(sizes: dict[str, int], chars: int = 40) -> pl.DataFrame:
    rows = [
        {
            "dataset": d,
            "prompt_id": f"p{i:02d}",
            "prompt": "x" * chars,
            "references": [],
            "source": d,
            "reference_missing_reason": "none",
        }
        for d, n in sizes.items()
        for i in range(n)
    ]
    return pl.DataFrame(rows)


def variants_of(prompts: pl.DataFrame, per_prompt: int, chars: int = 40) -> pl.DataFrame:
    rows = [
        {
            "dataset": d,
            "prompt_id": p,
            "variant_id": f"v{k}",
            "family": "noise",
            "subtype": "spacing",
            "strength": 1.0,
            "position": "global",
            "text": "y" * chars,
            "seed": 0,
            "semantic_score": 1.0,
            "kept": True,
            "reject_reason": None,
            "word_ratio": 1.0,
        }
        for d, p in prompts.select("dataset", "prompt_id").rows()
        for k in range(per_prompt)
    ]
    return pl.DataFrame(rows)


def ranges(pieces: list) -> list[tuple[str, int, int]]:
    return [(p.dataset, p.start, p.stop) for p in pieces]


def test_even_parts_differ_by_at_most_one_the_larger_first() -> None:
    assert even_parts(7, 3) == [(0, 3), (3, 2), (5, 2)]
    assert even_parts(8, 2) == [(0, 4), (4, 4)]
    assert even_parts(2, 4) == [(0, 1), (1, 1)]
    assert even_parts(5, 1) == [(0, 5)]


def test_one_worker_keeps_the_cut_every_shard_size_prompts() -> None:
    prompts = prompts_of({"b": 5, "a": 2})
    assert ranges(plan_pieces(prompts, 2)) == [
        ("a", 0, 2),
        ("b", 0, 2),
        ("b", 2, 4),
        ("b", 4, 5),
    ]


def test_two_workers_cut_each_shard_in_two_even_parts() -> None:
    prompts = prompts_of({"a": 5, "b": 1})
    assert ranges(plan_pieces(prompts, 4, workers=2)) == [
        ("a", 0, 2),
        ("a", 2, 4),
        ("a", 4, 5),  # the one-prompt remainder of the cut at 4 stays whole
        ("b", 0, 1),
    ]


def test_a_prompts_load_counts_the_base_and_its_kept_variants() -> None:
    prompts = prompts_of({"a": 1}, chars=9)  # ceil(9 / 4) = 3 tokens
    variants = pl.concat(
        [
            variants_of(prompts, 2, chars=4),  # 1 token each
            variants_of(prompts, 1, chars=400).with_columns(pl.lit(False).alias("kept")),
        ]
    )
    (row,) = prompt_loads(prompts, variants).rows(named=True)
    assert (row["requests"], row["prompt_tokens"]) == (3, 5)
    (piece,) = plan_pieces(prompts, 8, variants)
    assert piece.tokens(max_new_tokens=10) == 3 * 10 + 5


def test_deal_gives_the_parts_of_a_shard_to_different_workers() -> None:
    # wholes on their own: longest first onto the least loaded (of equals, the lower
    # number): 9 -> w0, 5 -> w1, 4 -> w1 (9 | 9), 3 -> w0, 2 -> w1
    assert deal([5, 9, 4, 3, 2], ["p", "q", "r", "s", "t"], 2) == [[1, 3], [0, 2, 4]]
    # x (14) first: 9 -> w0, 5 -> w1; y: 2 -> w1 (5 < 9), then its 1 to w0, which holds
    # no part of y (by load alone w1 would hold both: 7 < 9)
    assert deal([9, 5, 2, 1], ["x", "x", "y", "y"], 2) == [[0, 3], [1, 2]]
    # fewer parts than workers (a shard of two prompts, three workers): the lightest ones
    assert deal([3, 3, 3, 2, 2], ["a", "a", "a", "b", "b"], 3) == [[0, 3], [1, 4], [2]]


def test_each_worker_pays_its_share_of_a_dataset_whatever_it_costs() -> None:
    """Equal estimates, but answers to ``long`` take 4x those to ``short`` (what no plan
    knows): contiguous groups of the one-worker cut give one worker all of ``long``
    (16 against 4); the plan for two workers gives each half of both (10 and 10)."""
    prompts = prompts_of({"long": 4, "short": 4})
    cost = {"long": 4, "short": 1}
    one = plan_pieces(prompts, 4)
    contiguous = [[one[0]], [one[1]]]
    assert [sum(cost[p.dataset] * len(p.ids) for p in g) for g in contiguous] == [16, 4]
    two = plan_pieces(prompts, 4, workers=2)
    groups = deal([p.tokens(10) for p in two], [p.part_of for p in two], 2)
    assert [sum(cost[two[i].dataset] * len(two[i].ids) for i in g) for g in groups] == [10, 10]


@pytest.mark.parametrize("workers", [2, 3, 4])
def test_estimated_load_per_worker_is_within_one_prompt_of_the_mean(workers: int) -> None:
    prompts = prompts_of({"a": 20, "b": 12, "c": 5})
    # uneven prompts: lengths 10..80 characters, 1..4 kept variants
    prompts = prompts.with_columns(
        pl.Series("prompt", ["x" * (10 + 7 * (i % 11)) for i in range(prompts.height)])
    )
    variants = pl.concat(variants_of(prompts.slice(i, 1), 1 + i % 4) for i in range(prompts.height))
    pieces = plan_pieces(prompts, 8, variants, workers)
    loads = [p.tokens(20) for p in pieces]
    groups = deal(loads, [p.part_of for p in pieces], workers)
    carried = [sum(loads[i] for i in g) for g in groups]
    # the parts of each one-worker shard (8 prompts of a dataset) on different workers
    worker_of = {i: w for w, g in enumerate(groups) for i in g}
    for whole in {(p.dataset, p.start // 8) for p in pieces}:
        parts = [i for i, p in enumerate(pieces) if (p.dataset, p.start // 8) == whole]
        assert len({worker_of[i] for i in parts}) == len(parts)
    mean = sum(carried) / workers
    per_prompt = max(p.tokens(20) for p in plan_pieces(prompts, 1, variants))
    assert max(abs(c - mean) for c in carried) <= per_prompt
    assert max(abs(c - mean) for c in carried) / mean < 0.10


def test_assign_shards_balances_by_prompts_when_the_plan_has_no_estimates() -> None:
    old = [Shard(f"a-{i}", "a", 0, n, "p", "v") for i, n in enumerate([1, 3, 2, 2])]
    assert shard_load(old[0], 10) is None
    groups = assign_shards(old, 2, 10)
    assert [[s.label for s in g] for g in groups] == [["a-1", "a-0"], ["a-2", "a-3"]]


def test_write_shards_records_the_estimate_and_reads_back(tmp_path: Path) -> None:
    prompts = prompts_of({"a": 3}, chars=8)
    variants = variants_of(prompts, 2, chars=8)
    plan = write_shards(prompts, variants, 2, tmp_path, workers=2)
    shards = read_shards(plan)
    assert [s.label for s in shards] == ["a-0000-0000", "a-0001-0001", "a-0002-0002"]
    assert [(s.requests, s.prompt_tokens) for s in shards] == [(3, 6)] * 3
    assert pl.read_parquet(shards[1].variants_path)["prompt_id"].unique().to_list() == ["p01"]
    written = json.loads(plan.read_text())
    legacy = [
        {k: v for k, v in s.items() if k not in ("requests", "prompt_tokens", "part_of")}
        for s in written
    ]
    plan.write_text(json.dumps(legacy))  # a plan written before the estimate: still read
    assert [(s.requests, s.part_of) for s in read_shards(plan)] == [(None, None)] * 3
