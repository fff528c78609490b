"""The first line a run prints, before anything starts: what it will do (from the same plan
``sago run --dry-run`` prints) and roughly how long, where that can be said.

How long is said only for the embedded model on a CPU, from one measured rate: ``make run``
(the demo plan: 630 generations at 40 new tokens, 25,200 new tokens at most, its structural
variants from the rules) took 258 s after set-up on 2 idle CPU cores from a fresh clone,
about 0.010 s per new token of the plan's ceiling, scoring pass and BERTScore included.
Anything else (another model, a GPU, an API) is left to the progress lines, which give the
time left once the first batches are done.
"""

from __future__ import annotations

from pathlib import Path

from sago_core.budget.dry_run import PER_PROMPT
from sago_core.config import RunConfig
from sago_core.progress import duration
from sago_core.run_plan import RunPlan

# The embedded model's measured whole-run seconds per new token of the plan (see above).
EMBEDDED_MODEL = "hf:smollm2-135m"
EMBEDDED_CPU_SECONDS_PER_NEW_TOKEN = 258 / 25_200
MEASURED_ON = "2 CPU cores"
# Device nodes of a GPU (NVIDIA, AMD): checked without importing torch.
GPU_NODES = ("/dev/nvidia0", "/dev/kfd")


def start_line(plan: RunPlan, config: RunConfig) -> str:
    """``Run demo-...: 18 prompts, 1 model, up to 630 generations (25,200 new tokens) and
    630 scored sequences; roughly 4 min on 2 CPU cores (the demo's measured pace).``"""
    bound = "up to " if any(plan.kept_up_to.values()) else ""
    generations = sum(plan.generations.values())
    if plan.budgeted is not None:  # a budgeted run asks at most its budget, per model
        s = plan.budgeted.schedule
        sampled = plan.budgeted.sampled_prompts
        per_model = (s.budget + PER_PROMPT * sampled) * config.generation.samples
        generations = min(generations, per_model * len(plan.generations))
        bound = "up to "
    tokens = generations * config.generation.max_new_tokens
    scored = sum(plan.teacher_forced.values())
    if plan.budgeted is not None and scored:  # every asked answer is scored, no other
        scored = min(scored, generations)
    models = len(plan.generations)
    what = (
        f"Run {config.resolved_run_id()}: {sum(plan.prompts.values())} prompts, "
        f"{models} model{'s' if models != 1 else ''}, {bound}{generations:,} generations "
        f"({tokens:,} new tokens)" + (f" and {scored:,} scored sequences" if scored else "")
    )
    if plan.budgeted is not None:
        s = plan.budgeted.schedule
        what += f" (budgeted: at most {s.budget:,} of {s.full:,} cells)"
    return f"{what}; {rough_time(plan, tokens)}"


def rough_time(plan: RunPlan, tokens: int, gpu: bool | None = None) -> str:
    """Roughly how long, for the embedded model on a machine without a GPU."""
    gpu = any(Path(node).exists() for node in GPU_NODES) if gpu is None else gpu
    if set(plan.generations) == {EMBEDDED_MODEL} and not gpu and not plan.api:
        seconds = tokens * EMBEDDED_CPU_SECONDS_PER_NEW_TOKEN
        return (
            f"roughly {duration(seconds)} on {MEASURED_ON} at the demo's measured pace "
            "(less with cached work or more cores); progress lines follow"
        )
    return "how long: the progress lines say once the first batches are done"
