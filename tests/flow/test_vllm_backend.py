"""vLLM (CPU build) on the embedded model, for real: agreement with transformers at T=0, the
shared tokenisation of prompts and responses, and one run with a vLLM model and an API
model. One vLLM engine serves the module: the run's runs folder is the fixture's, so the
flow's ``open_backend`` finds the engine (and its transformers scorer) already built. The
parent side of the worker protocol (rendered prompt ids, stop ids, the engine record) is
also checked against a scripted worker, without vLLM."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from sago_core.backends.protocol import ScoringRequest
from tests.openai_server import ScriptedServer
from tests.vllm_env import require_vllm

MAX_NEW = 32


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("runs")


@pytest.fixture(scope="module")
def engines(runs_dir: Path) -> Iterator[tuple]:
    """The vLLM backend, opened with the places a run under ``runs_dir`` uses (its cache), and
    the transformers backend it scores with (float32, the same weights)."""
    require_vllm()
    from sago_core.artifacts.layout import CacheLayout
    from sago_core.backends.factory import BackendPlaces, close_engines, open_backend
    from sago_core.backends.target import model_target
    from sago_core.config import RunConfig

    places = BackendPlaces(CacheLayout.of(runs_dir))
    vllm = open_backend(model_target(RunConfig(), "vllm:smollm2-135m"), places)
    yield vllm, vllm.scorer()
    close_engines()  # the worker process goes with the module


@pytest.mark.slow
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
    # Same prompt ids, same stops, both argmax on the same float32 weights: only float
    # kernels differ, and a near-tie can still flip a token late in an answer.
    assert sum(same) / len(same) >= 0.8
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
    decoding = json.loads(engine["decoding"])
    assert decoding["temperature"] == 0.0 and decoding["generation_config"] == "vllm"
    assert decoding["stop_token_ids"] == json.loads(engine["scoring_stop_token_ids"])
    assert engine["prompts"] == "token ids rendered by transformers (chat template)"


@pytest.mark.slow
def test_sampled_prompts_beyond_one_step_are_answered_and_reproduced(engines: tuple) -> None:
    """Seeded sampling on the CPU build with more prompt tokens than one scheduler step
    (4,096): vLLM split the last prompt's prefill and its CPU runner could not rewind that
    request's generator ("CPU Generator does not use offset"), so the call failed."""
    from sago_core.backends.protocol import Sampling
    from sago_core.data.builtin import builtin_prompts

    vllm, _ = engines
    context = " ".join(p.prompt for p in builtin_prompts()) * 2
    prompts = [f"Set {i}. {context} Answer the first question." for i in range(10)]
    lengths = vllm.prompt_lengths(prompts)
    assert lengths is not None and sum(lengths) > 4096 and max(lengths) < 2048 - 8
    sampling = Sampling(temperature=0.7, top_p=1.0, top_k=0, seeds=tuple(range(100, 110)))
    first = vllm.generate(prompts, 4, 64, sampling)
    order = list(reversed(range(len(prompts))))
    again = vllm.generate([prompts[i] for i in order], 4, 64, sampling.rows(order))
    assert all(g.failure_reason is None for g in first)
    assert [g.response_text for g in first] == [
        again[order.index(i)].response_text for i in range(10)
    ]


@pytest.mark.slow
def test_one_run_with_a_vllm_model_and_an_api_model(
    engines: tuple, runs_dir: Path, harness: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's vLLM model is the module's engine (same target, same cache)."""
    from sago.flows.evaluate import evaluate
    from sago_core.backends.factory import _BUILT
    from sago_core.backends.vllm_backend import VllmBackend
    from sago_core.config import build_config

    monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
    with ScriptedServer() as server:
        config = build_config(
            "demo",
            {
                "models": ["vllm:smollm2-135m", "litellm:openai/mock-1"],
                "n": 1,
                "runs_dir": str(runs_dir),
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
    # The run reused the module's vLLM engine instead of starting a second one.
    assert [b for b in _BUILT if isinstance(b, VllmBackend)] == [engines[0]]
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


# -- the parent side of the protocol, against a scripted worker (no vLLM) ------------------

SCRIPTED_WORKER = """
import json, os, sys
import pyarrow as pa, pyarrow.parquet as pq
options = json.loads(sys.argv[2])  # argv[1] is vllm_worker.py, not run here
log = os.environ["SCRIPTED_WORKER_LOG"]
decoding = {"temperature": 0.0, "generation_config": "vllm", "stop_token_ids": []}
print(json.dumps({"ready": True, "vllm": "scripted", "device": "cpu",
                  "determinism": "scripted", "decoding": decoding}), flush=True)
with open(log, "a") as out:
    out.write(json.dumps({"options": options, "pid": os.getpid(),
                          "malloc": os.environ.get("MALLOC_MMAP_THRESHOLD_")}) + "\\n")
for line in sys.stdin:
    job = json.loads(line)
    if "release" in job:
        print(json.dumps({"released": True}), flush=True)
        continue
    if "engine" in job:
        with open(log, "a") as out:
            out.write(json.dumps({"options": job["engine"], "pid": os.getpid()}) + "\\n")
        print(json.dumps({"ready": True, "vllm": "scripted", "device": "cpu",
                          "determinism": "scripted", "decoding": decoding}), flush=True)
        continue
    table = pq.read_table(job["requests"]).to_pylist()
    with open(log, "a") as out:
        out.write(json.dumps({"job": job, "requests": table}) + "\\n")
    ids = [r["prompt_token_ids"][-2:] + [7] for r in table]
    pq.write_table(pa.table({"response_text": ["ignored"] * len(ids),
                             "response_token_ids": ids,
                             "finish_reason": ["stop"] * len(ids)}), job["responses"])
    print(json.dumps({"done": job["responses"],
                      "decoding": {**decoding, "stop_token_ids": job["stop_token_ids"],
                                   "max_tokens": job["max_new_tokens"]}}), flush=True)
"""


class ScriptedScorer:
    """The transformers side as the vLLM backend uses it: rendering, stops, decoding."""

    class Tokenizer:
        chat_template = None

        def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
            return " ".join(f"t{i}" for i in ids if not (skip_special_tokens and i == 7))

    tokenizer = Tokenizer()

    def render_prompt_ids(self, prompt: str) -> list[int]:
        return [1, *(len(word) for word in prompt.split())]

    def stop_token_ids(self) -> list[int]:
        return [7, 3]

    def describe(self) -> dict[str, str]:
        return {"backend": "hf", "chat_template_kwargs": "{}", "decoding": "{}"}


def scripted_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **options: Any) -> Any:
    from sago_core.backends.model_source import LocalModel
    from sago_core.backends.vllm_backend import VllmBackend
    from sago_core.config import VllmSettings

    script = tmp_path / "worker.py"
    script.write_text(SCRIPTED_WORKER)
    python = tmp_path / "python"
    log = tmp_path / "log.jsonl"
    monkeypatch.setenv("SCRIPTED_WORKER_LOG", str(log))
    python.write_text(f'#!/bin/sh\nexec {sys.executable} {script} "$@"\n')
    python.chmod(0o755)
    source = LocalModel("dir", str(tmp_path), None, "sha256:0")
    backend = VllmBackend(source, VllmSettings(python=str(python)), tmp_path, **options)
    backend._scorer = ScriptedScorer()
    return backend, log


def test_a_reused_worker_serves_the_next_model_without_a_new_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sago_core.backends.model_source import LocalModel
    from sago_core.backends.vllm_backend import VllmBackend

    first, log = scripted_backend(tmp_path, monkeypatch, reuse_worker=True)
    first.generate(["x"], 2, 1)
    first.close()
    (tmp_path / "b").mkdir()
    source = LocalModel("dir", str(tmp_path / "b"), None, "sha256:1")
    second = VllmBackend(source, first.settings, tmp_path, reuse_worker=True)
    second._scorer = ScriptedScorer()
    try:
        assert second.generate(["a bb"], 2, 1)[0].response_token_ids == (1, 2, 7)
    finally:
        second.close()
    started = [json.loads(line) for line in log.read_text().splitlines()]
    started = [line for line in started if "options" in line]
    assert len({line["pid"] for line in started}) == 1  # one process, two engines
    assert [line["options"]["model"] for line in started] == [str(tmp_path), str(tmp_path / "b")]


def test_the_worker_gets_rendered_prompt_ids_and_the_stop_ids(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sago_core.backends import allocator

    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.delenv("SAGO_MALLOC_TUNING", raising=False)
    backend, log = scripted_backend(
        tmp_path, monkeypatch, chat_template_kwargs=(("enable_thinking", True),)
    )
    try:
        answers = backend.generate(["one three", "a bb ccc"], 5, 4)
        engine = backend.describe()
    finally:
        backend.close()
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    options, job = lines[0]["options"], lines[1]
    assert options["use_model_defaults"] is False and options["tensor_parallel_size"] == 1
    # glibc's mmap threshold fixed in the worker's environment (no-op off glibc)
    assert lines[0]["malloc"] == ("131072" if allocator._glibc() is not None else None)
    assert [r["prompt_token_ids"] for r in job["requests"]] == [[1, 3, 5], [1, 1, 2, 3]]
    assert [r["prompt"] for r in job["requests"]] == ["one three", "a bb ccc"]
    assert job["job"]["stop_token_ids"] == [3, 7] and job["job"]["max_new_tokens"] == 5
    # The text is the transformers tokenizer's decoding of the worker's ids.
    assert [a.response_text for a in answers] == ["t3 t5", "t2 t3"]
    assert answers[0].response_token_ids == (3, 5, 7)
    decoding = json.loads(engine["decoding"])
    assert decoding["stop_token_ids"] == [3, 7] and decoding["max_tokens"] == 5
    assert engine["prompts"].endswith("(plain text, no chat template)")
    assert engine["scoring_backend"] == "hf" and engine["tensor_parallel_size"] == "1"


def test_devices_are_the_tensor_parallel_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sago_core.backends.vllm_backend import tensor_parallel_size
    from sago_core.config import VllmSettings
    from sago_core.errors import ConfigError

    assert tensor_parallel_size(VllmSettings(), 1) == 1
    assert tensor_parallel_size(VllmSettings(), 4) == 4
    assert tensor_parallel_size(VllmSettings(tensor_parallel_size=2), 1) == 2
    assert tensor_parallel_size(VllmSettings(tensor_parallel_size=2), 2) == 2
    with pytest.raises(ConfigError, match="conflicts"):
        tensor_parallel_size(VllmSettings(tensor_parallel_size=2), 4)
    backend, log = scripted_backend(tmp_path, monkeypatch, devices=2, use_model_defaults=True)
    try:
        backend.generate(["x"], 2, 1)
    finally:
        backend.close()
    options = json.loads(log.read_text().splitlines()[0])["options"]
    assert options["tensor_parallel_size"] == 2 and options["use_model_defaults"] is True


def test_an_unsupported_architecture_is_a_typed_error(tmp_path: Path) -> None:
    from sago_core.backends.model_source import LocalModel
    from sago_core.backends.vllm_backend import VllmBackend, VllmUnsupportedModelError
    from sago_core.config import VllmSettings

    python = tmp_path / "python"
    reply = {
        "error": "ValidationError: Model architectures ['X'] are not supported",
        "kind": "engine",
    }
    python.write_text(f"#!/bin/sh\necho '{json.dumps(reply)}'\n")
    python.chmod(0o755)
    source = LocalModel("dir", str(tmp_path), None, "sha256:0")
    backend = VllmBackend(source, VllmSettings(python=str(python)), tmp_path)
    with pytest.raises(VllmUnsupportedModelError, match="use hf: for this model"):
        backend.generate(["x"], 2, 1)
