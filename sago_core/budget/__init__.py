"""Budgeted, sequential stability estimation: sample (prompt, variant) cells by a
stratified two-stage design, estimate the full grid's scores with design weights, run in
rounds that stop when every target is met or every verdict is decided, and plan a design
from a pilot's variance components. Pure numpy: no model, no Prefect."""
