"""sago's Python API: evaluate models, score generations made elsewhere, compare and read
finished runs, from a script or a notebook.

```python
import sago

result = sago.run(models=["hf:smollm2-135m"], datasets="builtin", n=2, max_new_tokens=8)
print(result.summary)              # SGS per model, dataset and axis (a polars frame)
print(result.verdicts)             # above tolerance, or not shown above it
again = sago.load(result.folder)   # a run folder, or its URL on an object store
```

The ``sago`` command line is a thin layer over these functions.
"""

from __future__ import annotations

from sago.comparing import Comparison, compare
from sago.evaluation import configure, dry_run, resume, run
from sago.result import RunResult, load
from sago.scoring import score

__all__ = [
    "Comparison",
    "RunResult",
    "compare",
    "configure",
    "dry_run",
    "load",
    "resume",
    "run",
    "score",
]
