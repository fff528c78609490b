"""Stage: structural variants (length, mood) from rules or a rewriter model (cached per prompt).

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

The grid's ``method`` says who rewrites: the rules (``variants/structural_rules.py``, which
need no model and no cache), the rewriter model, or the rules first and the model for the
prompts they leave. With ``rules`` the rewriter is never built, so a run whose rewriter
could keep nothing does not pay for asking it; a prompt the rules leave is recorded as a
rejected variant with the rules' reason. The model is asked its first batch first: when
every rewrite of that pilot is rejected, the rest are recorded as not asked, with why.
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
from sago_core.stages.tool_answers import ToolAnswer, ToolRequest, ask_tool
from sago_core.variants.seeding import variant_seed
from sago_core.variants.structural import (
    INSTRUCTION_VERSION,
    RewriteTask,
    check_rewrite,
    clean_rewrite,
    length_task,
    mood_task,
)
from sago_core.variants.structural_rules import RuleRewrite, rule_rewrite


def structural_variant_id(task: RewriteTask) -> str:
    return f"structural:{task.subtype}:{task.strength:g}:global"


def rewrite_tasks(prompt: str, grid: StructuralGrid) -> list[RewriteTask]:
    tasks = [length_task(prompt, m) for m in grid.lengths]
    return [*tasks, mood_task(prompt)] if grid.mood else tasks


def _origin(row: dict, task: RewriteTask) -> Origin:
    file, line = split_source(row["source"] or row["dataset"])
    return file, line, f"prompt {row['prompt_id']} (rewrite {structural_variant_id(task)})"


def _references(row: dict) -> tuple[str, ...]:
    return tuple(row.get("references") or ())


def _by_rules(grid: StructuralGrid, row: dict, task: RewriteTask) -> RuleRewrite | None:
    """The rules' answer where the method uses them (None: the model alone rewrites)."""
    if grid.method == "model":
        return None
    return rule_rewrite(row["prompt"], task, _references(row))


def _to_model(grid: StructuralGrid, rule: RuleRewrite) -> bool:
    return rule.text is None and grid.method == "rules_then_model"


def _ask_with_pilot(
    asked: list[int], pilot_size: int, ask: Callable[[list[int]], list[ToolAnswer]]
) -> dict[int, ToolAnswer]:
    """The model's answers to ``asked``, its first batch asked first: when every rewrite of
    that pilot is rejected, the rest are not asked (each recorded with why), since a
    rewriter that keeps nothing of a full batch would most likely keep nothing more and a
    run should not pay for a stage it keeps nothing from. At T = 0 the pilot's answers are
    cached, so a rerun stops at the same place without asking again."""
    pilot, rest = asked[:pilot_size], asked[pilot_size:]
    answers = dict(zip(pilot, ask(pilot), strict=True))
    if rest and all(answer.reason is not None for answer in answers.values()):
        reason = (
            f"not asked: all {len(pilot)} rewrites of the rewriter's first batch were "
            "rejected, so it was asked for no more"
        )
        answers.update((i, ToolAnswer("", reason)) for i in rest)
    elif rest:
        answers.update(zip(rest, ask(rest), strict=True))
    return answers


def model_rewrite_tasks(prompt: str, grid: StructuralGrid) -> list[RewriteTask]:
    """The rewrites of ``prompt`` the rewriter model would be asked for under the grid's
    method (the run plan counts and prices these)."""
    tasks = rewrite_tasks(prompt, grid)
    if grid.method == "model":
        return tasks
    if grid.method == "rules":
        return []
    return [t for t in tasks if rule_rewrite(prompt, t).text is None]


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
    backend, called only when the method asks the model and some rewrite is not cached."""
    jobs = [
        (row, task)
        for row in prompts.iter_rows(named=True)
        for task in rewrite_tasks(row["prompt"], grid)
    ]
    ruled = [_by_rules(grid, row, task) for row, task in jobs]
    asked = [i for i, rule in enumerate(ruled) if rule is None or _to_model(grid, rule)]
    opened: list[Backend] = []

    def rewriter() -> Backend:  # built once, however many passes ask it
        if not opened:
            opened.append(open_rewriter())
        return opened[0]

    def ask(part: list[int]) -> list[ToolAnswer]:
        requests = [
            ToolRequest(
                jobs[i][1].instruction,
                rewrite_key(
                    rewriter_identity, jobs[i][1], jobs[i][0]["prompt"], grid.max_new_tokens
                ),
                _origin(*jobs[i]),
            )
            for i in part
        ]
        return ask_tool(
            rewriter,
            requests,
            cache,
            grid.max_new_tokens,
            grid.batch_size,
            clean=lambda _, raw: clean_rewrite(raw),
            check=lambda j, text: check_rewrite(
                jobs[part[j]][0]["prompt"], text, jobs[part[j]][1], _references(jobs[part[j]][0])
            ),
            entry=lambda _, text: {"text": text, "rewriter": rewriter_identity},
            keep_rejected=True,  # at T = 0 the rewriter would only give it again
        )

    by_model = _ask_with_pilot(asked, grid.batch_size, ask)
    records = []
    for i, (row, task) in enumerate(jobs):
        rule = ruled[i]
        if i in by_model:
            text, reason = by_model[i].text, by_model[i].reason
        else:
            assert rule is not None
            text, reason = rule.text or "", rule.reason
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
