"""Budgeted, sequential stability estimation: sample (prompt, variant) cells by a
stratified two-stage design, estimate the full grid's scores with design weights, run in
rounds that stop when every target is met or every verdict is decided, and plan a design
from a pilot's variance components. Pure numpy: no model, no Prefect."""

# What a budgeted run does not yet do, refused before any model loads (one line naming the
# key): K > 1 samples per prompt text (the design's cells would need the sampling tests'
# excesses, not yet estimated from a sample of cells).
BUDGET_WITH_SAMPLES = (
    "budget: a budgeted run answers each prompt text once (generation.samples 1); "
    "run generation.samples > 1 on the full grid"
)
