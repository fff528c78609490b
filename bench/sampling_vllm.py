"""The vLLM speed-up from sharing a prompt's prefix across its K samples.

``sample_responses`` asks for a prompt text's K samples next to each other, each a request
with its own seed, so that vLLM's prefix cache computes the prompt once for all K. This
measures what that saves: K = 8 samples at T 0.7 of a few prompt texts through sago's own
path (``answer_apart`` -> the ``vllm:`` backend -> its worker), on an engine with prefix
caching (sago's) and on one without (the worker's engine option
``enable_prefix_caching: false``), same requests, same seeds. Each engine first answers two
short warm-up prompts (its start, the transformers scorer's load and the first call are
timed apart); then the K x texts requests go in one call, timed from the parent as a run
pays them.

The texts are few-shot prompts (closed-book QA with the built-in prompts and their reference
answers as shots, about 600 tokens each), because that is where prefill matters: vLLM caches
whole blocks only (128 tokens on its CPU build, 16 on a GPU), so a one-question prompt
shorter than a block shares nothing. Each text starts with different shots, so no two texts
share a block: what is saved comes from the K samples of one text alone.

Printed: wall time per sample, generated tokens/s, the prompt tokens computed and those the
prefix cache served (vLLM's own count), the speed-up (wall without / with the cache) and the
share of answers identical on both engines. Each request is sampled from its own seeded
generator, so the same seed gives the same answer unless the logits differ: computing a
prompt's tail against cached keys and values instead of in one prefill can change the
floating-point rounding, and a near-tie then picks another token.

``python -m bench.sampling_vllm`` prints the table (a temporary folder for the materialised
weights); ``python -m bench.sampling_vllm WORKDIR OUT`` (the bench's subprocess) measures and
writes WORKDIR/OUT/timings.json.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MODEL = "vllm:smollm2-135m"
SAMPLES = 8
TEMPERATURE = 0.7
TEXTS = 6
MAX_NEW_TOKENS = 32
OUT = "sampling-vllm"
DATASET = "bench_fewshot"
WARMUP = ("What is 2 + 2?", "Name a colour.")


def fewshot_texts(count: int) -> list[str]:
    """``count`` closed-book QA prompts: every other answered built-in prompt as a shot, then
    the question. Text i's shots start at the i-th answered prompt (rotated), so the texts'
    first tokens, and hence their cache blocks, differ."""
    from sago_core.data.builtin import builtin_prompts

    answered = [(p.prompt, p.references[0]) for p in builtin_prompts() if p.references]
    texts = []
    for i in range(count):
        question = answered[i]
        shots = [answered[(i + 1 + j) % len(answered)] for j in range(len(answered) - 1)]
        body = "".join(f"Question: {q}\nAnswer: {a}\n\n" for q, a in shots)
        texts.append(f"{body}Question: {question[0]}\nAnswer:")
    return texts


def measure(workdir: Path, out: str) -> None:
    """Both engines, one after the other, on the same requests; writes ``timings.json``."""
    import polars as pl

    from sago_core.artifacts.layout import CacheLayout
    from sago_core.backends.protocol import Sampling
    from sago_core.backends.target import model_target
    from sago_core.backends.vllm_backend import VllmBackend
    from sago_core.config import GenerationSettings, RunConfig, VllmSettings
    from sago_core.stages.generation import answer_apart
    from sago_core.stages.samples import sample_seeds
    from sago_core.vocabulary import BASE_FAMILY, BASE_VARIANT_ID

    settings = GenerationSettings(
        max_new_tokens=MAX_NEW_TOKENS, temperature=TEMPERATURE, samples=SAMPLES
    )
    texts = fewshot_texts(TEXTS)
    # One row per (text, sample), a text's samples next to each other, as sample_responses
    # orders them; the seeds are the stage's own.
    rows = pl.DataFrame(
        {
            "dataset": DATASET,
            "prompt_id": [f"fewshot-{t}" for t in range(TEXTS) for _ in range(SAMPLES)],
            "variant_id": BASE_VARIANT_ID,
            "sample": [s for _ in range(TEXTS) for s in range(SAMPLES)],
        }
    )
    prompts = [texts[t] for t in range(TEXTS) for _ in range(SAMPLES)]
    seeds = sample_seeds(settings, MODEL, rows)
    sampling = Sampling(settings.temperature, settings.top_p, settings.top_k, tuple(seeds))
    target = model_target(RunConfig(), MODEL)
    assert target.source is not None
    options = engine_options()
    load = os.getloadavg()[0]
    arms: list[dict[str, Any]] = []
    answers: list[list[tuple[int, ...]]] = []
    lengths: list[int] | None = None
    device = None
    for caching in (True, False):
        backend = VllmBackend(
            target.source,
            target.vllm or VllmSettings(),
            CacheLayout.of(workdir).materialised,
            chat_template_kwargs=target.chat_template_kwargs,
            use_model_defaults=target.use_model_defaults,
            engine_options={**options, "enable_prefix_caching": caching},
        )
        try:
            started = time.perf_counter()
            backend.generate(list(WARMUP), 4, 1, Sampling(TEMPERATURE, 1.0, 0, (1, 2)))
            load_seconds = time.perf_counter() - started
            lengths = lengths or backend.prompt_lengths(texts)
            device = backend.engine.get("device")
            started = time.perf_counter()
            outputs = answer_apart(
                backend, prompts, [BASE_FAMILY] * len(prompts), settings, sampling
            )
            seconds = time.perf_counter() - started
            prefill = dict(backend.prefill)
        finally:
            backend.close()
        if backend.engine.get("prefix_caching") is not caching:
            raise RuntimeError(
                f"asked for prefix caching {caching}, the engine reports "
                f"{backend.engine.get('prefix_caching')}: the option did not reach it"
            )
        answers.append([o.response_token_ids for o in outputs])
        arms.append(
            {
                "prefix_caching": caching,
                "load_seconds": load_seconds,
                "seconds": seconds,
                "requests": len(outputs),
                "generated_tokens": sum(len(o.response_token_ids) for o in outputs),
                "prompt_tokens": prefill.get("prompt_tokens"),
                "cached_prompt_tokens": prefill.get("cached_prompt_tokens"),
            }
        )
    folder = workdir / out
    folder.mkdir(parents=True, exist_ok=True)
    result = {
        "model": MODEL,
        "device": device,
        "texts": TEXTS,
        "samples": SAMPLES,
        "temperature": TEMPERATURE,
        "max_new_tokens": MAX_NEW_TOKENS,
        "prompt_lengths": lengths,
        "engine_options": options,
        "load_average": [load, os.getloadavg()[0]],
        "arms": arms,
        "identical": identical(answers[0], answers[1]),
    }
    (folder / "timings.json").write_text(json.dumps(result, indent=2))


def engine_options() -> dict[str, Any]:
    """Both engines' options beyond sago's. Without a GPU, chunked prefill off: vLLM 0.32's
    CPU runner rewinds a seeded request's generator after a partial prefill with
    ``set_offset``, which a CPU generator refuses ("CPU Generator does not use offset"), so
    a call whose prompts overflow one step's token budget fails at T > 0."""
    import torch

    return {} if torch.cuda.is_available() else {"enable_chunked_prefill": False}


def identical(a: list[tuple[int, ...]], b: list[tuple[int, ...]]) -> int:
    """How many requests got the same answer tokens on both engines (same order)."""
    if len(a) != len(b):
        raise ValueError(f"{len(a)} answers against {len(b)}")
    return sum(x == y for x, y in zip(a, b, strict=True))


def _count(value: int | None) -> str:
    return "NA" if value is None else str(value)


def arm_row(arm: dict[str, Any]) -> str:
    seconds, requests = arm["seconds"], arm["requests"]
    prompt, cached = arm["prompt_tokens"], arm["cached_prompt_tokens"]
    computed = None if prompt is None or cached is None else prompt - cached
    name = "on" if arm["prefix_caching"] else "off"
    return (
        f"{name:<14}{seconds:>8.1f}{1000 * seconds / requests:>11.0f}"
        f"{arm['generated_tokens'] / seconds:>11.1f}{_count(prompt):>12}"
        f"{_count(computed):>10}{_count(cached):>12}"
    )


def table(result: dict[str, Any]) -> list[str]:
    """The two engines side by side, the speed-up (wall off / on) and the identical share."""
    by = {arm["prefix_caching"]: arm for arm in result["arms"]}
    on, off = by[True], by[False]
    lengths = result.get("prompt_lengths")
    span = "NA (no prompt lengths)" if not lengths else f"{min(lengths)}-{max(lengths)}"
    requests = on["requests"]
    same = result["identical"]
    start, end = result["load_average"]
    options = result.get("engine_options") or "sago's options"
    lines = [
        f"vLLM prefix cache across a text's samples: {result['model']} on "
        f"{result.get('device') or 'NA'}, {result['texts']} few-shot prompt texts ({span} "
        f"prompt tokens each), K={result['samples']} at T {result['temperature']}, at most "
        f"{result['max_new_tokens']} new tokens; engine start and warm-up "
        f"{on['load_seconds']:.1f} s (on) / {off['load_seconds']:.1f} s (off), apart; load "
        f"average {start:.1f} -> {end:.1f}; both engines with {options}:",
        f"{'prefix cache':<14}{'wall s':>8}{'ms/sample':>11}{'gen tok/s':>11}"
        f"{'prompt tok':>12}{'computed':>10}{'from cache':>12}",
        arm_row(off),
        arm_row(on),
        f"speed-up from the prefix cache (wall off / on): {off['seconds'] / on['seconds']:.2f}x",
        f"identical answers with and without it (same per-request seeds): {same}/{requests} "
        f"({100 * same / requests:.1f}%)",
    ]
    return lines


def vllm_sampling_costs(workdir: Path) -> list[str]:
    """The table, measured in a subprocess; one line saying why when there is no vLLM
    environment."""
    from bench.pipelines import run_pipeline
    from sago_core.backends.vllm_backend import vllm_python
    from sago_core.config import VllmSettings
    from sago_core.errors import ConfigError

    try:
        vllm_python(VllmSettings())
    except ConfigError as exc:
        return [f"vLLM prefix-cache speed-up skipped: {exc}"]
    return table(run_pipeline("bench.sampling_vllm", workdir, OUT))


def main() -> int:
    if len(sys.argv) > 1:
        measure(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else OUT)
        return 0
    workdir = Path(tempfile.mkdtemp(prefix="sago-bench-sampling-vllm-"))
    print("\n".join(vllm_sampling_costs(workdir)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
