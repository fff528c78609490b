"""Budgeted, sequential stability estimation (issue 40): sample (prompt, variant) cells by a
stratified two-stage design, estimate the full grid's scores with design weights, run in
rounds that stop when every target is met or every verdict is decided, and plan a design
from a pilot's variance components. Pure numpy: no model, no Prefect."""

# Until the evaluate flow asks for only the sampled cells (issue 40, what remains), a
# budgeted configuration is a plan (``--dry-run``) and a replay (``python -m bench.budget``),
# never a run that would quietly generate the full grid under a budgeted run id.
BUDGET_NOT_WIRED = (
    "budget: the evaluate flow does not yet generate only the sampled cells; "
    "use --dry-run to see the budgeted plan, or python -m bench.budget to replay a finished run"
)
