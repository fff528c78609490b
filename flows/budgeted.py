"""A budgeted run (``budget:`` in the config; sago_core/budget/): the grid's (prompt, variant)
cells asked in rounds, each round's shards holding the sampled prompts, their replays and
every cell asked so far (the row cache answers the earlier ones without the model), until
every target is met or every verdict decided, or the budget is spent.

Each round's cells are a function of (seed, round, the first round's values: the later
rounds' weights are frozen after it), and the values of a finished round are cached stages,
so a run killed in round 2 resumes there and asks no answered row again; a full run after
it finds every budgeted row in the row cache.

At K > 1 answers per prompt text a round runs the model's sampling stages on its cells too
(in the round's folder), so a cell's value is its excess delta: a noisy measurement whose
sampling noise the design's within-stratum variance already holds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from sago.flows.runtime.dispatch import shard_workers
from sago.flows.runtime.monitor import RunMonitor
from sago.flows.runtime.stage_runner import StageRunner
from sago.tasks.budget import budget_round_task
from sago.tasks.metrics import assemble_task
from sago.tasks.prepare import plan_shards_task
from sago_core.artifacts.layout import PROMPTS_FILE
from sago_core.artifacts.store import read_parquet
from sago_core.backends.target import ModelTarget
from sago_core.budget.baseline import read_baseline
from sago_core.budget.record import write_budget
from sago_core.budget.rounds import BudgetedDesign, budgeted_design, column_name
from sago_core.budget.run_cells import RunCells, cell_values, run_cells
from sago_core.budget.sequential import BudgetResult, run_budgeted
from sago_core.config import RunConfig
from sago_core.stages.shards import Shard, read_shards


def round_shards(plan: str, k: int) -> list[Shard]:
    """The round's shards, labelled by round so their folders never meet another round's."""
    return [
        replace(s, label=f"round{k}-{s.label}", part_of=s.part_of and f"round{k}-{s.part_of}")
        for s in read_shards(plan)
    ]


# evaluate.evaluate_model: (stage, config, target, judge, shards, monitor, prompts, where)
ModelStages = Callable[..., dict[str, str]]


class Rounds:
    """The oracle of ``run_budgeted``: each call runs one round through the models' stages
    and returns the new cells' values; ``per_model`` holds the last round's artifacts."""

    def __init__(
        self,
        stage: StageRunner,
        config: RunConfig,
        targets: list[ModelTarget],
        judge: ModelTarget | None,
        inputs: dict[str, str],
        design: BudgetedDesign,
        run_model: ModelStages,
    ) -> None:
        self.stage, self.config, self.targets, self.judge = stage, config, targets, judge
        self.inputs, self.design, self.run_model = inputs, design, run_model
        self.asked = np.zeros(len(design.cells.ids), dtype=bool)
        self.round = 0
        self.per_model: list[dict[str, str]] = []
        self.monitor: RunMonitor | None = None

    def __call__(self, new: np.ndarray) -> np.ndarray:
        self.round += 1
        self.asked |= new
        k, layout, cells = self.round, self.stage.layout, self.design.cells
        where = layout.run_dir / "budget" / f"round-{k}"
        round_variants = self.stage(
            budget_round_task,
            prompts_path=self.inputs["prompts"],
            variants_path=self.inputs["variants"],
            cells=[list(cells.ids[i]) for i in np.flatnonzero(self.asked)],
            prompts=[list(p) for p in self.design.sampled],
            out_dir=str(where),
        )
        prompts = str(Path(round_variants).with_name(PROMPTS_FILE))
        workers = shard_workers(self.config.orchestration)
        # One worker: the round is one shard of its own files, one generation and one scoring
        # task per model however many datasets it touches (a task costs about a second).
        shards = [Shard(f"round{k}", "all", 0, len(self.design.sampled), prompts, round_variants)]
        if workers > 1:
            plan = self.stage(
                plan_shards_task,
                prompts_path=prompts,
                variants_path=round_variants,
                shard_size=self.config.orchestration.shard_size,
                out_dir=str(layout.shards / f"round-{k}"),
                workers=workers,
            )
            shards = round_shards(plan, k)
        self.monitor = RunMonitor(self.config.resolved_run_id(), len(shards) * len(self.targets))
        self.per_model = [
            self.run_model(
                self.stage,
                self.config,
                target,
                self.judge,
                shards,
                self.monitor,
                prompts,
                where / "models" / Path(layout.model_dir(target.spec)).name,
            )
            for target in self.targets
        ]
        deltas = self.stage(
            assemble_task,
            name="deltas",
            schema_name="DELTAS",
            part_paths=[m["deltas"] for m in self.per_model],
            out_dir=str(where),
        )
        return cell_values(read_parquet(deltas), cells, self.design.columns, new)


def budgeted_models(
    stage: StageRunner,
    config: RunConfig,
    targets: list[ModelTarget],
    judge: ModelTarget | None,
    inputs: dict[str, str],
    run_model: ModelStages,
    sample_run: Callable[..., dict[str, Any]],
) -> tuple[list[dict[str, str]], dict[str, str], RunMonitor]:
    """Every round of every model (``inputs``: the run's prompts and variants paths;
    ``run_model``: the evaluate flow's stages of one model over a list of shards;
    ``sample_run``: its run-level K > 1 stages, whose variance components of the asked cells
    split budget.json's variance table); (the last round's per-model artifacts, the budget's
    artifact paths by the report's argument names, the last round's monitor)."""
    assert config.budget is not None
    cells: RunCells = run_cells(read_parquet(inputs["variants"]))
    models = [t.spec for t in targets]
    design = budgeted_design(cells, config.budget, config.seed, models, config.generation.samples)
    baseline = (
        read_baseline(
            Path(config.budget.baseline),
            config.model_dump(mode="json", by_alias=True),
            cells,
            design.columns,
        )
        if config.budget.baseline
        else None
    )
    rounds = Rounds(stage, config, targets, judge, inputs, design, run_model)
    result: BudgetResult = run_budgeted(
        design.design,
        design.schedule.totals,
        rounds,
        [column_name(m, a) for m, a in design.columns],
        target=design.target,
        baseline=baseline,
    )
    assert rounds.monitor is not None
    sampled = sample_run(stage, rounds.per_model)  # the run's own stages: a cache hit later
    components = read_parquet(sampled["variance_components_path"]) if sampled else None
    paths: dict[str, Any] = write_budget(result, design, stage.layout.run_dir, baseline, components)
    return rounds.per_model, paths, rounds.monitor
