"""vLLM (CPU build) on the embedded model, for real: agreement with transformers at T=0, the
shared tokenisation of responses, and one run with a vLLM model and an API model."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from sago_core.backends.protocol import ScoringRequest
from tests.openai_server import ScriptedServer
from tests.vllm_env import require_vllm

pytestmark = pytest.mark.slow
MAX_NEW = 32


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple]:
    require_vllm()
    from sago_core.backends.factory import get_backend

    cache = tmp_path_factory.mktemp("weights")
    vllm = get_backend("vllm:smollm2-135m", weights_cache_dir=str(cache))
    yield vllm, get_backend("hf:smollm2-135m")


def test_vllm_and_transformers_agree_at_t0_and_share_the_response_tokens(engines: tuple) -> None:
    from sago_core.data.builtin import builtin_prompts

    vllm, hf = engines
    prompts = [p.prompt for p in builtin_prompts()]
    started = time.perf_counter()
    fast = vllm.generate(prompts, MAX_NEW, 64)
    vllm_seconds = time.perf_counter() - started
    started = time.perf_counter()
    slow = hf.generate(prompts, MAX_NEW, 64)
    hf_seconds = time.perf_counter() - started
    same = [a.response_text == b.response_text for a, b in zip(fast, slow, strict=True)]
    tokens = sum(len(g.response_token_ids) for g in fast)
    print(
        f"identical at T=0: {sum(same)}/{len(same)}; vLLM {tokens / vllm_seconds:.0f} tok/s, "
        f"transformers {sum(len(g.response_token_ids) for g in slow) / hf_seconds:.0f} tok/s"
    )
    assert sum(same) / len(same) >= 0.5  # most prompts: float kernels differ, greedy drifts
    # Tokenisation: vLLM's ids decode, with the shared tokenizer, to vLLM's text ...
    tokenizer = hf.tokenizer
    for g in fast:
        decoded = tokenizer.decode(list(g.response_token_ids), skip_special_tokens=True).strip()
        assert decoded == g.response_text
    # ... and the transformers pass scores exactly those ids (the scoring pass is shared).
    requests = [ScoringRequest(p, g.response_token_ids) for p, g in zip(prompts, fast, strict=True)]
    scored = vllm.score(requests, 16)
    pairs = zip(scored, fast, strict=True)
    assert all(s.n_response_tokens == len(g.response_token_ids) for s, g in pairs)
    assert all(s.logprob is not None and np.isfinite(s.logprob) for s in scored)
    engine = vllm.describe()
    assert engine["vllm"] == "0.32.0" and engine["device"] == "cpu"
    assert "single-process" in engine["determinism"]


def test_one_run_with_a_vllm_model_and_an_api_model(
    engines: tuple, harness: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flows.evaluate import evaluate
    from sago_core.config import build_config

    monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
    with ScriptedServer() as server:
        config = build_config(
            "demo",
            {
                "models": ["vllm:smollm2-135m", "litellm:openai/mock-1"],
                "n": 1,
                "runs_dir": str(tmp_path / "runs"),
                "generation": {"max_new_tokens": 16, "batch_size": 64},
                "api": {"base_url": server.base_url},
                "variants": {
                    "register": {"strengths": [2], "positions": ["suffix"]},
                    "noise": {"spacing": [5], "punctuation": [3], "capitalization": [50]},
                    "structural": None,
                },
            },
        )
        run_dir = Path(evaluate(config))
    summary = pl.read_parquet(run_dir / "summary.parquet").filter(pl.col("dataset") == "__pooled__")
    vllm_rows = summary.filter(pl.col("model") == "vllm:smollm2-135m")
    api_rows = summary.filter(pl.col("model") == "litellm:openai/mock-1")
    assert vllm_rows["sgs"].null_count() == 0  # all six axes: vLLM + the transformers pass
    missing = api_rows.filter(pl.col("sgs").is_null())["axis"].to_list()
    assert sorted(missing) == ["act", "ent", "prob"]
    generations = pl.read_parquet(run_dir / "generations.parquet")
    engine = generations.filter(pl.col("model") == "vllm:smollm2-135m")["engine"][0]
    assert '"vllm": "0.32.0"' in engine and "determinism" in engine
    page = (run_dir / "report.html").read_text()
    assert "vllm:smollm2-135m" in page and "litellm:openai/mock-1" in page
