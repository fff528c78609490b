"""A small demo-shaped run of the embedded model, recorded as data before a refactor.

``python -m tests.golden.demo_run record`` runs it and writes ``demo_small.json`` (the
artifacts' rows, sorted by their keys, minus what depends on the machine). The test
``tests/flow/test_demo_unchanged.py`` runs it again and compares, so a change meant to keep
behaviour (a refactor) is shown to keep it. Record again only
when behaviour changes on purpose, from the commit *before* the change, and say so in the
commit message. The recorded file names the commit it came from.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import polars as pl

from sago_core.config import RunConfig, build_config
from tests.grids import tiny_variants

GOLDEN = Path(__file__).with_name("demo_small.json")

# Per artifact: the columns that identify a row (the sort order). Machine-dependent columns
# (the engine's library versions and device) are left out of the comparison.
KEYS = {
    "prompts.parquet": ["dataset", "prompt_id"],
    "variants.parquet": ["dataset", "prompt_id", "variant_id"],
    "generations.parquet": ["model", "dataset", "prompt_id", "variant_id"],
    "deltas.parquet": ["model", "dataset", "prompt_id", "variant_id", "axis"],
    "scores.parquet": ["model", "dataset", "prompt_id", "axis"],
    "summary.parquet": ["model", "dataset", "axis"],
}
MACHINE_DEPENDENT = {"engine"}


def config(runs_dir: Path) -> RunConfig:
    return build_config(
        "demo",
        {
            "models": ["hf:smollm2-135m"],
            "datasets": ["builtin"],
            "n": 2,
            "runs_dir": str(runs_dir),
            "generation": {"max_new_tokens": 12},
            "variants": tiny_variants(),
        },
    )


def rows_of(run_dir: Path) -> dict[str, list[dict[str, Any]]]:
    data = {}
    for name, keys in KEYS.items():
        frame = pl.read_parquet(run_dir / name)
        frame = frame.select([c for c in frame.columns if c not in MACHINE_DEPENDENT])
        data[name] = frame.sort(keys).to_dicts()
    return data


def run(runs_dir: Path) -> Path:
    from sago.flows.evaluate import evaluate

    return Path(evaluate(config(runs_dir)))


def record() -> None:
    from prefect.testing.utilities import prefect_test_harness

    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp, prefect_test_harness(server_startup_timeout=180):
        data = rows_of(run(Path(tmp) / "runs"))
    payload = {"recorded_at_commit": commit, "artifacts": data}
    GOLDEN.write_text(json.dumps(payload, indent=0, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {GOLDEN} from commit {commit}")


if __name__ == "__main__":
    if sys.argv[1:] != ["record"]:
        sys.exit("usage: python -m tests.golden.demo_run record")
    record()
