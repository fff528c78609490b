"""``make bench``'s cost per sample (bench/sampling.py) stays runnable: its four stages on a
one-prompt workload with the shared tiny model, in this process, and its table."""

from __future__ import annotations

import json
from pathlib import Path

from bench.sampling import OUT, SAMPLES, measure, table
from bench.workload import Workload


def test_the_cost_per_sample_is_measured_and_tabled(tiny_model_dir: Path, tmp_path: Path) -> None:
    Workload(n=1, max_new_tokens=3, limit=1, per_family=1, model=f"hf:{tiny_model_dir}").save(
        tmp_path
    )
    measure(tmp_path)
    result = json.loads((tmp_path / OUT / "timings.json").read_text())
    texts = result["texts"]
    assert texts >= 2 and result["samples"] == SAMPLES == 4
    assert result["sample_rows"] == texts * 4
    # each of the 4 base samples scored under each of the texts
    assert result["scored_rows"] == texts * 4
    assert set(result["seconds"]) == {"load", "generate", "analyse", "sample", "analyse-samples"}
    lines = table(result)
    assert len(lines) == 5
    assert lines[2].startswith("generation") and lines[3].startswith("teacher-forced")
    assert f"{texts} prompt texts" in lines[0]
