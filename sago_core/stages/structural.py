"""Stage: structural variants (length, mood) from a rewriter model, cached per prompt.

The rewrite cache key is (rewriter identity, instruction version, subtype, strength, token
budget, prompt), so a rerun, or another run over the same prompts, reproduces the same
rewrites without calling the model (``stages/tool_answers.py``: the pass the translator
shares). Every answer the checks judge is cached under its key: a usable rewrite as its
text, a rejected one with its text and reason (at T = 0 the rewriter would only give it
again), so a rerun over a warm cache asks nothing and does not even load the rewriter. Both
are checked again when read (a changed check applies to them too); a rejected rewrite is
recorded as a rejected variant with its reason, never dropped. A failed call (the
backend's failure) is not cached: it is asked again. The checks see the prompt's reference
answers (a rewrite holding one is answering, not rewriting: ``variants/rewrite_checks.py``).
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from sago_core.artifacts.json_cache import JsonCache
from sago_core.artifacts.schemas import VARIANTS, conform, empty
from sago_core.backends.protocol import Backend
from sago_core.config import StructuralGrid
from sago_core.data.prompt import split_source
from sago_core.stages.generation import Origin
from sago_core.stages.tool_answers import ToolRequest, ask_tool
from sago_core.variants.seeding import variant_seed
from sago_core.variants.structural import (
    INSTRUCTION_VERSION,
    RewriteTask,
    check_rewrite,
    clean_rewrite,
    length_task,
    mood_task,
)


def structural_variant_id(task: RewriteTask) -> str:
    return f"structural:{task.subtype}:{task.strength:g}:global"


def rewrite_tasks(prompt: str, grid: StructuralGrid) -> list[RewriteTask]:
    tasks = [length_task(prompt, m) for m in grid.lengths]
    return [*tasks, mood_task(prompt)] if grid.mood else tasks


def _origin(row: dict, task: RewriteTask) -> Origin:
    file, line = split_source(row["source"] or row["dataset"])
    return file, line, f"prompt {row['prompt_id']} (rewrite {structural_variant_id(task)})"


def rewrite_key(rewriter_identity: str, task: RewriteTask, prompt: str, max_new_tokens: int) -> str:
    """The cache key of one rewrite: who rewrote (``behaviour_key`` of the rewriter), the
    instruction's version, what was asked, the token budget and the prompt."""
    return JsonCache.key(
        rewriter_identity,
        INSTRUCTION_VERSION,
        task.subtype,
        f"{task.strength:g}",
        f"max_new_tokens={max_new_tokens}",
        prompt,
    )


def rewrite_structural(
    prompts: pl.DataFrame,
    grid: StructuralGrid,
    open_rewriter: Callable[[], Backend],
    rewriter_identity: str,
    cache: JsonCache,
    seed: int,
) -> pl.DataFrame:
    """The structural candidates of every prompt; ``open_rewriter`` builds the rewriter's
    backend, called only when some rewrite is not cached."""
    jobs = [
        (row, task)
        for row in prompts.iter_rows(named=True)
        for task in rewrite_tasks(row["prompt"], grid)
    ]
    requests = [
        ToolRequest(
            task.instruction,
            rewrite_key(rewriter_identity, task, row["prompt"], grid.max_new_tokens),
            _origin(row, task),
        )
        for row, task in jobs
    ]
    answers = ask_tool(
        open_rewriter,
        requests,
        cache,
        grid.max_new_tokens,
        grid.batch_size,
        clean=lambda _, raw: clean_rewrite(raw),
        check=lambda i, text: check_rewrite(
            jobs[i][0]["prompt"], text, jobs[i][1], tuple(jobs[i][0].get("references") or ())
        ),
        entry=lambda _, text: {"text": text, "rewriter": rewriter_identity},
        keep_rejected=True,  # at T = 0 the rewriter would only give it again
    )
    records = []
    for (row, task), answer in zip(jobs, answers, strict=True):
        text, reason = answer.text, answer.reason
        vid = structural_variant_id(task)
        records.append(
            {
                "dataset": row["dataset"],
                "prompt_id": row["prompt_id"],
                "variant_id": vid,
                "family": "structural",
                "subtype": task.subtype,
                "strength": task.strength,
                "position": "global",
                "text": text,
                "seed": variant_seed(seed, row["dataset"], row["prompt_id"], vid),
                "semantic_score": None,
                "kept": reason is None,
                "reject_reason": reason,
                "word_ratio": None,
            }
        )
    if not records:
        return empty(VARIANTS)
    return conform(pl.DataFrame(records, schema=VARIANTS), VARIANTS)
