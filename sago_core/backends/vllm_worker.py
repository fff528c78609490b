"""The vLLM worker: one engine in its own process and environment, fed Parquet files.

Run by path with the vLLM environment's Python (vLLM pins packages the orchestration
environment cannot share): ``python vllm_worker.py '<engine options JSON>'``. It imports
only the standard library, pyarrow and vLLM. Protocol, one JSON object per line:

  stdout, once ready: {"ready": true, "vllm": version, "device": ..., "determinism": ...}
  stdin:  {"requests": in.parquet, "responses": out.parquet, "max_new_tokens": n}
  stdout: {"done": out.parquet} or {"error": message}

``in.parquet`` holds a ``prompt`` column; ``out.parquet`` gets ``response_text``,
``response_token_ids`` and ``finish_reason`` in the same order. Greedy (T=0), the model's
chat template, prefix caching on (variants share most of their prompt), whole batches.
"""

from __future__ import annotations

import json
import os
import sys

# Run by path, this file's folder would come first on sys.path; keep it from shadowing
# installed packages.
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(__file__)]

# The protocol owns the real stdout; everything else printed (vLLM logs to stdout) goes to
# stderr, so a log line can never be mistaken for a reply.
_PROTOCOL = os.fdopen(os.dup(1), "w", encoding="utf-8")
os.dup2(2, 1)


def _emit(message: dict) -> None:
    _PROTOCOL.write(json.dumps(message) + "\n")
    _PROTOCOL.flush()


def main() -> None:
    options = json.loads(sys.argv[1])
    # Deterministic scheduling: the engine core runs in this process (no scheduler process).
    # Batch-invariant kernels need Triton on a GPU; the CPU build has none.
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(options.pop("cpu_kv_cache_gib", 2)))
    import torch

    if torch.cuda.is_available():
        os.environ.setdefault("VLLM_BATCH_INVARIANT", "1")
    mode = "single-process scheduling" + (
        ", batch-invariant kernels" if os.environ.get("VLLM_BATCH_INVARIANT") == "1" else ""
    )
    import pyarrow as pa
    import pyarrow.parquet as pq
    import vllm
    from vllm import LLM, SamplingParams

    model = options.pop("model")
    engine = LLM(model=model, seed=0, enable_prefix_caching=True, **options)
    device = str(getattr(engine.llm_engine.vllm_config.device_config, "device_type", "unknown"))
    _emit(
        {
            "ready": True,
            "vllm": vllm.__version__,
            "device": device,
            "determinism": mode,
        }
    )
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        try:
            prompts = pq.read_table(job["requests"]).column("prompt").to_pylist()
            params = SamplingParams(temperature=0.0, max_tokens=int(job["max_new_tokens"]))
            outputs = engine.chat(
                [[{"role": "user", "content": p}] for p in prompts], params, use_tqdm=False
            )
            table = pa.table(
                {
                    "response_text": [o.outputs[0].text.strip() for o in outputs],
                    "response_token_ids": [list(o.outputs[0].token_ids) for o in outputs],
                    "finish_reason": [o.outputs[0].finish_reason or "stop" for o in outputs],
                }
            )
            partial = job["responses"] + ".partial"
            pq.write_table(table, partial)
            os.replace(partial, job["responses"])
            _emit({"done": job["responses"]})
        except Exception as exc:  # reported to the parent, which raises it there
            import traceback

            _emit({"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()})


if __name__ == "__main__":
    main()
