"""Cache keys that cannot collide: a stage's key includes where it writes.

The case found by running it: one model, one dataset file, one shard. The model-level
``assemble[generations]`` reads the shard's file; the run-level one reads the model's file,
the same bytes. With equal inputs and parameters and the output place left out of the key,
the run-level stage got the model-level result, and the run finished without
``generations.parquet`` at its root. Checked here: every artifact of the contract (README,
"What a run writes") exists at its documented place, and over small configs (models,
datasets, shard sizes drawn by hypothesis) no two stages of a run share a cache key or an
artifact. (That a rerun still hits every key is the kill-and-resume suite's and
test_cache_integrity's business.) Every run is a new process, forked from one that already
imported sago and Prefect (``harness.target_processes``).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import polars as pl
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sago_core.artifacts.layout import model_slug
from tests.reliability.harness import QUESTIONS, run_dirs, target_processes, write_inputs

pytestmark = pytest.mark.slow
ROOT_FILES = (
    "run_config.json",
    "manifest.json",
    "prompts.parquet",
    "variants.parquet",
    "generations.parquet",
    "deltas.parquet",
    "scores.parquet",
    "summary.parquet",
    "summary.md",
    "report.html",
)
MODEL_FILES = ("generations.parquet", "analysis.parquet", "pairs.parquet", "deltas.parquet")


def _configure(config: Path, **changes: object) -> Path:
    values = yaml.safe_load(config.read_text())
    for key, value in changes.items():
        values[key] = value
    config.write_text(yaml.safe_dump(values))
    return config


def _extra_dataset(shared: Path) -> str:
    data = shared / "more.jsonl"
    rows = [f"Name a colour of the {thing}?" for thing in ("sky", "sea", "grass", "sun")]
    data.write_text("".join(json.dumps({"question": q}) + "\n" for q in rows))
    return str(data)


def contract_problems(run_dir: Path, models: list[str]) -> list[str]:
    missing = [name for name in ROOT_FILES if not (run_dir / name).is_file()]
    for model in models:
        folder = run_dir / "models" / model_slug(model)
        missing += [f"{folder.name}/{n}" for n in MODEL_FILES if not (folder / n).is_file()]
    return missing


def test_one_model_one_dataset_one_shard_writes_the_whole_contract(
    server_env: dict[str, str], tmp_path: Path
) -> None:
    config = _configure(
        write_inputs(tmp_path / "inputs", tmp_path), orchestration={"shard_size": 32}
    )
    outcome = target_processes(server_env).run(config, tmp_path / "calls.jsonl")
    assert outcome.returncode == 0, outcome.output[-3000:]
    (run_dir,) = run_dirs(tmp_path / "runs")
    assert contract_problems(run_dir, ["mock:reliability"]) == []
    manifest = json.loads((run_dir / "manifest.json").read_text())
    places = {(s["stage"], s["path"]) for s in manifest["stages"]}
    assert ("assemble", "generations.parquet") in places
    slug = model_slug("mock:reliability")
    assert ("assemble", f"models/{slug}/generations.parquet") in places
    keys = [s["cache_key"] for s in manifest["stages"]]
    assert len(keys) == len(set(keys))
    # the run-level file is the model's rows, all of them (one model)
    run_level = pl.read_parquet(run_dir / "generations.parquet")
    assert run_level.equals(pl.read_parquet(run_dir / "models" / slug / "generations.parquet"))
    assert run_level.filter(pl.col("variant_id") == "base").height == len(QUESTIONS)


@settings(
    max_examples=3,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    models=st.integers(min_value=1, max_value=2),
    datasets=st.integers(min_value=1, max_value=2),
    shard_size=st.sampled_from([1, 2, 3, 64]),
    n=st.integers(min_value=1, max_value=4),
)
def test_no_two_stages_of_a_run_share_a_key(
    server_env: dict[str, str], models: int, datasets: int, shard_size: int, n: int
) -> None:
    with tempfile.TemporaryDirectory(prefix="sago-keys-") as folder:
        root = Path(folder)
        config = write_inputs(root / "inputs", root)
        specs = ["mock:keys-a", "mock:keys-b"][:models]
        files = [yaml.safe_load(config.read_text())["datasets"][0]]
        files += [_extra_dataset(root / "inputs")] if datasets == 2 else []
        _configure(
            config,
            models=specs,
            datasets=files,
            n=n,
            orchestration={"shard_size": shard_size},
        )
        first = target_processes(server_env).run(config, root / "calls.jsonl")
        assert first.returncode == 0, first.output[-3000:]
        (run_dir,) = run_dirs(root / "runs")
        stages = json.loads((run_dir / "manifest.json").read_text())["stages"]
        keys = [s["cache_key"] for s in stages]
        paths = [s["path"] for s in stages]
        assert len(keys) == len(set(keys)), sorted(keys)
        assert len(paths) == len(set(paths)), sorted(paths)
        assert contract_problems(run_dir, specs) == []
