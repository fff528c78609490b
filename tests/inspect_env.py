"""inspect_ai's own reader for the logs sago writes. inspect-ai's pins clash with this
environment's (fsspec, botocore), so it lives in an environment of its own (.ci/run makes
``.venv-inspect``; ``SAGO_INSPECT_PYTHON`` names its interpreter) and reads the logs in a
subprocess; where inspect_ai is importable here, that interpreter is used instead."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# Prints, per log, what read_eval_log parsed: samples with their scores, the eval's metrics.
READ = """
import json, sys
from inspect_ai.log import read_eval_log
out = []
for path in sys.argv[1:]:
    log = read_eval_log(path)
    out.append({
        "status": log.status,
        "model": log.eval.model,
        "task": log.eval.task,
        "samples": [
            {
                "id": s.id,
                "input": s.input,
                "target": s.target,
                "completion": s.output.completion,
                "metadata": s.metadata,
                "scores": {k: [v.value, v.explanation] for k, v in (s.scores or {}).items()},
            }
            for s in log.samples
        ],
        "metrics": {
            score.name: {m.name: m.value for m in score.metrics.values()}
            for score in log.results.scores
        },
    })
print(json.dumps(out))
"""


def inspect_python() -> str:
    """The interpreter that has inspect_ai; skips (or fails, where .ci/run made one) when
    there is none."""
    named = os.environ.get("SAGO_INSPECT_PYTHON")
    if named:
        if not Path(named).is_file():
            pytest.fail(f"SAGO_INSPECT_PYTHON={named} does not exist")
        return named
    if importlib.util.find_spec("inspect_ai") is not None:
        return sys.executable
    pytest.skip("inspect_ai is not installed (set SAGO_INSPECT_PYTHON to an environment with it)")


def read_eval_logs(paths: list[Path]) -> list[dict[str, Any]]:
    """Each log as inspect_ai.log.read_eval_log reads it (see ``READ``)."""
    done = subprocess.run(
        [inspect_python(), "-c", READ, *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return list(json.loads(done.stdout.strip().splitlines()[-1]))
