"""Shards: results do not depend on the shard size; a run that fails in one shard resumes
(`sago resume`) recomputing only unfinished shards; the UI gets progress, summary and
report artifacts."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from sago_core.config import RunConfig, build_config
from tests.manifests import generate_cache_hits

pytestmark = pytest.mark.slow


def _config(tiny: Path | str, runs: Path, shard_size: int) -> RunConfig:
    """``tiny``: a model folder, or a ``mock:`` spec."""
    model = tiny if isinstance(tiny, str) else f"hf:{tiny}"
    return build_config(
        "demo",
        {
            "models": [model],
            "n": 2,
            "runs_dir": str(runs),
            "generation": {"max_new_tokens": 4, "batch_size": 16},
            "orchestration": {"shard_size": shard_size},
            "variants": {
                "register": {"strengths": [2], "positions": ["suffix"]},
                "noise": {"spacing": [5], "punctuation": [3], "capitalization": [50]},
                "structural": None,
            },
        },
    )


@pytest.fixture(scope="module")
def one_prompt_shards(
    harness: None, tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[RunConfig, Path]:
    """The run with one prompt per shard, in one process: the reference that both the
    shard-size and the device tests compare against (run once, read only)."""
    from sago.flows.evaluate import evaluate

    config = _config(tiny_model_dir, tmp_path_factory.mktemp("shards") / "one", shard_size=1)
    return config, Path(evaluate(config))


def test_results_do_not_depend_on_the_shard_size(
    one_prompt_shards: tuple[RunConfig, Path], tiny_model_dir: Path, tmp_path: Path
) -> None:
    from sago.flows.evaluate import evaluate

    _, small = one_prompt_shards
    whole = Path(evaluate(_config(tiny_model_dir, tmp_path / "b", shard_size=64)))
    shards = json.loads((small / "shards" / "shards.json").read_text())
    whole_shards = json.loads((whole / "shards" / "shards.json").read_text())
    assert len(shards) == 12 and len(whole_shards) == 6
    assert {s["label"] for s in shards} >= {"builtin_alpaca-0000-0000", "builtin_alpaca-0001-0001"}
    key = ["model", "dataset", "prompt_id", "variant_id"]
    a = pl.read_parquet(small / "generations.parquet").sort(key).drop("engine")
    b = pl.read_parquet(whole / "generations.parquet").sort(key).drop("engine")
    assert a.equals(b)
    sa = pl.read_parquet(small / "summary.parquet").select("model", "dataset", "axis", "sgs")
    sb = pl.read_parquet(whole / "summary.parquet").select("model", "dataset", "axis", "sgs")
    # Identical answers; the teacher-forced pass sees other batch paddings, so Prob/Ent may
    # move in the last float digits (the noise floor measures the same thing).
    x, y = sa.sort("dataset", "axis"), sb.sort("dataset", "axis")
    assert x.select("dataset", "axis").equals(y.select("dataset", "axis"))
    # On this project's CPUs the padded float32 pass moves a near-zero SGS (~2e-6) by up
    # to 1.9e-7: an absolute 1e-6 floor, far below any SGS worth reading.
    np.testing.assert_allclose(x["sgs"].to_numpy(), y["sgs"].to_numpy(), rtol=1e-5, atol=1e-6)


def test_a_run_failing_in_one_shard_resumes_only_the_unfinished_shards(
    harness: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sago.flows.evaluate import evaluate
    from sago.flows.runtime.monitor import artifact_key
    from sago_cli.main import main
    from sago_core.backends.mock import FAIL_ENV, MockBackendFailure
    from sago_core.stages.prompts import prepare_prompts

    config = _config("mock:flaky-shards", tmp_path / "runs", shard_size=1)
    fourth = prepare_prompts(config).sort("dataset", "prompt_id")["prompt"][3]
    with monkeypatch.context() as patch:
        patch.setenv(FAIL_ENV, fourth)  # the 4th shard's base prompt: 3 shards finish first
        with pytest.raises(MockBackendFailure, match="fell over"):
            evaluate(config)
    run_dir = tmp_path / "runs" / config.resolved_run_id()
    finished = sorted(run_dir.glob("models/*/shards/*/generations.parquet"))
    assert len(finished) == 3  # three shards done; the failed one left no file
    assert not list(run_dir.rglob("*.tmp"))

    assert main(["resume", str(run_dir)]) == 0
    hits = generate_cache_hits(run_dir)
    assert len(hits) == 12
    assert sum(hits.values()) == 3  # the finished shards were not recomputed
    assert all(hits[p.parent.name] for p in finished)

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    run_id = config.resolved_run_id()
    with get_client(sync_client=True) as client:
        keys = [artifact_key(kind, run_id) for kind in ("progress", "summary", "report")]
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=keys))
        )
    by_key = {a.key: a for a in artifacts}
    assert set(by_key) == set(keys)
    progress = max((a for a in artifacts if a.key == keys[0]), key=lambda a: a.updated or a.created)
    assert progress.data == 100.0 and "12/12 shards" in (progress.description or "")
    table = next(a for a in artifacts if a.key == keys[1])
    assert "bleu" in json.dumps(table.data)


def test_local_devices_get_one_worker_process_each_with_the_same_results(
    one_prompt_shards: tuple[RunConfig, Path], tmp_path: Path
) -> None:
    """No server: devices=2 starts one worker process per device (CUDA_VISIBLE_DEVICES=0
    and 1 set before each starts; CPU backend here) and the results equal one process."""
    from sago.flows.evaluate import evaluate

    one, alone = one_prompt_shards
    two = one.model_copy(
        update={
            "runs_dir": tmp_path / "two",
            "orchestration": one.orchestration.model_copy(update={"devices": 2}),
        }
    )
    spread = Path(evaluate(two))
    workers = [json.loads(p.read_text()) for p in spread.glob("models/*/shards/*/worker.json")]
    assert len(workers) == 12
    assert {w["device"] for w in workers} == {"0", "1"}
    assert len({w["pid"] for w in workers}) == 2  # one process per device, engine reused
    assert all(w["pid"] != os.getpid() for w in workers)
    key = ["model", "dataset", "prompt_id", "variant_id"]
    a = pl.read_parquet(alone / "generations.parquet").sort(key).drop("engine")
    b = pl.read_parquet(spread / "generations.parquet").sort(key).drop("engine")
    assert a.equals(b)
