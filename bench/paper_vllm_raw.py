"""The raw engine for ``make bench-paper``'s generation ratio: one ``vllm.LLM.generate`` call.

Run by path with the vLLM environment's Python (like sago's worker):
``python paper_vllm_raw.py OPTIONS_JSON REQUESTS_PARQUET RESULT_JSON``. OPTIONS_JSON holds
the engine options sago's worker gets (model folder, dtype, max_model_len, ...), the job
(``max_new_tokens``, ``stop_token_ids``) and the worker's file (``worker``), whose own
option rule (a CPU's prefills never split) the engine gets too; REQUESTS_PARQUET the prompt
token ids sago fed its engine. The engine is built as sago's worker builds it (seed 0, prefix
caching, vLLM's own generation config) and decodes greedily with the same stops; only
``generate`` is timed.
Writes seconds, generated tokens and each prompt's token ids to RESULT_JSON.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from typing import Any


def worker_options(worker_file: str, options: dict[str, Any]) -> dict[str, Any]:
    """The options as sago's worker hands them to ``vllm.LLM`` (its own rule, not a copy)."""
    spec = importlib.util.spec_from_file_location("sago_vllm_worker", worker_file)
    assert spec is not None and spec.loader is not None
    worker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(worker)
    return dict(worker.whole_prefills_on_cpu(options))


def main() -> None:
    options = json.loads(sys.argv[1])
    requests, result = sys.argv[2], sys.argv[3]
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(options.pop("cpu_kv_cache_gib", 2)))
    options.pop("cpu_kv_cache_gib", None)
    max_new_tokens = int(options.pop("max_new_tokens"))
    stops = [int(i) for i in options.pop("stop_token_ids")]
    options = worker_options(options.pop("worker"), options)
    import pyarrow.parquet as pq
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    started = time.perf_counter()
    llm = LLM(seed=0, enable_prefix_caching=True, generation_config="vllm", **options)
    load_seconds = time.perf_counter() - started
    params = SamplingParams(
        n=1,
        max_tokens=max_new_tokens,
        stop_token_ids=stops,
        ignore_eos=bool(stops),
        skip_special_tokens=True,
        temperature=0.0,
        top_p=1.0,
        top_k=0,
        min_p=0.0,
        repetition_penalty=1.0,
        presence_penalty=0.0,
        frequency_penalty=0.0,
    )
    ids = pq.read_table(requests).column("prompt_token_ids").to_pylist()
    prompts = [TokensPrompt(prompt_token_ids=list(p)) for p in ids]
    started = time.perf_counter()
    outputs = llm.generate(prompts, params, use_tqdm=False)
    seconds = time.perf_counter() - started
    answers = [list(o.outputs[0].token_ids) for o in outputs]
    with open(result, "w", encoding="utf-8") as out:
        json.dump(
            {
                "load_seconds": load_seconds,
                "seconds": seconds,
                "tokens": sum(len(a) for a in answers),
                "response_token_ids": answers,
            },
            out,
        )


if __name__ == "__main__":
    main()
