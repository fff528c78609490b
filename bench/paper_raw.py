"""The raw engines ``make bench-paper`` holds sago's stages against, on the run's own inputs.

- generation: one ``vllm.LLM.generate`` of the very prompt token ids sago fed its engine,
  with the same engine options and greedy settings, in the same vLLM environment
  (``paper_vllm_raw.py``, run there as a subprocess);
- scoring pass: a plain batched forward of the same weights (the scorer sago loaded) over
  the same teacher-forced sequences, with what the pass's hooks give: every layer's state at
  the last prompt token, the response tokens' log-probabilities and entropies;
- BERTScore: ``bert_score.BERTScorer.score`` on the same (variant, base) answer pairs, and
  sago's own scorer beside it on the same pairs (BLEU, loads and artifacts apart).

Each returns its measured seconds (load excluded, measured apart) and amount of work.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from sago_core.artifacts.layout import CacheLayout
from sago_core.backends.factory import BackendPlaces, open_backend
from sago_core.backends.model_source import resolve_bertscore_model
from sago_core.backends.target import model_target
from sago_core.backends.tensor_ops import response_logprob_and_entropy
from sago_core.backends.vllm_backend import (
    WORKER,
    VllmBackend,
    render_prompt_ids,
    stop_token_ids,
    vllm_python,
)
from sago_core.config import RunConfig
from sago_core.vocabulary import BASE_VARIANT_ID

RAW_VLLM = Path(__file__).with_name("paper_vllm_raw.py")
KEY = ["model", "dataset", "prompt_id", "variant_id"]


@dataclass(frozen=True)
class RawRun:
    seconds: float
    amount: int  # tokens (generation, scoring pass) or pairs (BERTScore)
    load_seconds: float
    identical: float | None = None  # share of answers identical to sago's (generation)

    @property
    def rate(self) -> float:
        return self.amount / self.seconds if self.seconds > 0 else float("nan")


def open_vllm(config: RunConfig, runs_dir: Path) -> VllmBackend:
    """The run's ``vllm:`` backend with the run's caches (its materialised weights); its
    engine worker is never started here, only its transformers scorer is loaded."""
    backend = open_backend(
        model_target(config, config.models[0]), BackendPlaces(CacheLayout.of(runs_dir))
    )
    if not isinstance(backend, VllmBackend):
        raise SystemExit(f"bench-paper measures a vllm: model, not {config.models[0]!r}")
    return backend


def raw_step(fraction: float) -> int:
    """k of "every k-th": the raw engines redo every k-th generation and pair of the run
    (k = round(1 / fraction); 1: all). In the run's own order, so each dataset, prompt and
    variant family keeps its share, and the sample still batches the engines as fully as
    the whole (at the full grid, a raw pass of everything adds as long again as sago's
    generation)."""
    return 1 if fraction >= 1 else max(1, round(1 / fraction))


def raw_generation(
    backend: VllmBackend, config: RunConfig, generations: pl.DataFrame, workdir: Path
) -> RawRun:
    import pyarrow as pa
    import pyarrow.parquet as pq

    scorer = backend.scorer()
    ids = [render_prompt_ids(scorer, p) for p in generations["prompt_text"].to_list()]
    requests = workdir / "raw-requests.parquet"
    pq.write_table(
        pa.table({"prompt_token_ids": pa.array(ids, type=pa.list_(pa.int64()))}), requests
    )
    settings = config.vllm
    options: dict[str, Any] = {  # as VllmBackend._start builds them
        "model": str(backend.folder),
        "dtype": settings.dtype,
        "max_model_len": settings.max_model_len,
        "tensor_parallel_size": backend.tensor_parallel_size,
        "enforce_eager": settings.enforce_eager,
        "cpu_kv_cache_gib": settings.cpu_kv_cache_gib,
        "trust_remote_code": backend.trust_remote_code,
        "max_new_tokens": config.generation.max_new_tokens,
        "stop_token_ids": stop_token_ids(scorer),
        "worker": str(WORKER),
    }
    if os.environ.get("CUDA_VISIBLE_DEVICES", "") not in ("", "-1"):
        options["gpu_memory_utilization"] = settings.gpu_memory_utilization
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", str(os.cpu_count() or 1))
    result = workdir / "raw-generation.json"
    subprocess.run(
        [vllm_python(settings), str(RAW_VLLM), json.dumps(options), str(requests), str(result)],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=(workdir / "raw-generation.log").open("w"),
    )
    done = json.loads(result.read_text(encoding="utf-8"))
    sago_ids = [list(r) for r in generations["response_token_ids"].to_list()]
    same = sum(a == b for a, b in zip(done["response_token_ids"], sago_ids, strict=True))
    return RawRun(
        done["seconds"], done["tokens"], done["load_seconds"], same / max(len(sago_ids), 1)
    )


def teacher_forced_rows(
    scorer: Any, prompts: Sequence[str], responses: Sequence[Sequence[int] | None]
) -> list[tuple[int, list[int]]]:
    """(prompt length, prompt + response ids) per answer, as the scoring pass sees it
    (``scorer``: the transformers backend, which renders the prompts)."""
    rows = []
    for prompt, response in zip(prompts, responses, strict=True):
        ids = render_prompt_ids(scorer, prompt)
        rows.append((len(ids), ids + [int(t) for t in response or []]))
    return rows


def raw_forward(
    scorer: Any, rows: list[tuple[int, list[int]]], batch_size: int, max_batch_tokens: int
) -> RawRun:
    """Length-sorted batches (at most ``batch_size`` rows and ``max_batch_tokens`` padded
    tokens), right-padded, one forward each with every hidden state; per row the states at
    the last prompt token and the response's log-probability and mean entropy."""
    import torch

    model = scorer.model
    head = model.get_output_embeddings()
    pad = int(scorer.tokenizer.pad_token_id or 0)
    order = sorted(range(len(rows)), key=lambda i: len(rows[i][1]))
    batches: list[list[int]] = [[]]
    for i in order:
        batch = batches[-1]
        longest = max([len(rows[j][1]) for j in batch] + [len(rows[i][1])])
        if batch and (len(batch) >= batch_size or longest * (len(batch) + 1) > max_batch_tokens):
            batches.append([])
        batches[-1].append(i)
    started = time.perf_counter()
    kept = []
    with torch.inference_mode():
        for batch in batches:
            width = max(len(rows[i][1]) for i in batch)
            ids = torch.full((len(batch), width), pad, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for k, i in enumerate(batch):
                ids[k, : len(rows[i][1])] = torch.tensor(rows[i][1])
                mask[k, : len(rows[i][1])] = 1
            # logits_to_keep=1: the head runs on the response positions only (below), as
            # in sago's pass, not on every position of every row
            out = model(
                input_ids=ids.to(scorer.device),
                attention_mask=mask.to(scorer.device),
                output_hidden_states=True,
                logits_to_keep=1,
            )
            final = out.hidden_states[-1]
            for k, i in enumerate(batch):
                n_prompt, seq = rows[i]
                states = torch.stack([h[k, n_prompt - 1] for h in out.hidden_states[1:]])
                kept.append(states.float().cpu().numpy())
                n_resp = len(seq) - n_prompt
                if n_resp > 0:
                    logits = head(final[k, n_prompt - 1 : len(seq) - 1]).float()
                    response_logprob_and_entropy(logits, torch.tensor(seq[n_prompt:]))
    seconds = time.perf_counter() - started
    return RawRun(seconds, sum(len(seq) for _, seq in rows), 0.0)


def answer_pairs(
    generations: pl.DataFrame, pairs: pl.DataFrame
) -> tuple[list[str], list[str], list[float]]:
    """(variant answer, base answer, the stage's F1) of every pair sago scored with
    BERTScore."""
    base = generations.filter(pl.col("variant_id") == BASE_VARIANT_ID).select(
        "model", "dataset", "prompt_id", pl.col("answer_text").alias("base_answer")
    )
    scored = (
        pairs.filter(pl.col("bert_f1").is_not_null())
        .select(*KEY, "bert_f1")
        .join(generations.select(*KEY, "answer_text"), on=KEY)
        .join(base, on=["model", "dataset", "prompt_id"])
    )
    return (
        scored["answer_text"].to_list(),
        scored["base_answer"].to_list(),
        scored["bert_f1"].to_list(),
    )


def _raw_scorer(config: RunConfig) -> Any:
    """``bert_score``'s own scorer with the run's encoder settings."""
    from bert_score import BERTScorer

    settings = config.bertscore
    return BERTScorer(
        model_type=resolve_bertscore_model(settings.model),
        num_layers=settings.num_layers,
        batch_size=settings.batch_size,
        lang=None,
    )


def raw_bertscore(config: RunConfig, candidates: list[str], references: list[str]) -> RawRun:
    settings = config.bertscore
    started = time.perf_counter()
    scorer = _raw_scorer(config)
    load_seconds = time.perf_counter() - started
    started = time.perf_counter()
    scorer.score(candidates, references, batch_size=settings.batch_size)
    return RawRun(time.perf_counter() - started, len(candidates), load_seconds)


def bertscore_side_by_side(
    config: RunConfig,
    candidates: list[str],
    references: list[str],
    stage_f1: Sequence[float],
    rounds: int = 2,
) -> tuple[RawRun, RawRun]:
    """``bert_score.BERTScorer.score`` and sago's own BERTScore (``get_bert_scorer(...).f1``,
    what ``score-pairs`` calls, same encoder settings) on the same pairs, in this process,
    timed alternately (the best of ``rounds`` each, so both see the same load on shared
    cores), each encoder's load timed apart. BLEU, the artifacts' reading and writing are
    not in either (``bleu_seconds`` times BLEU apart). ``identical``: the share of pairs
    whose F1 is the stage's (within 1e-6) for each side; (raw, sago)."""
    from sago_core.axes.text_similarity import get_bert_scorer

    settings = config.bertscore
    started = time.perf_counter()
    raw = _raw_scorer(config)
    raw_load = time.perf_counter() - started
    started = time.perf_counter()
    sago = get_bert_scorer(settings.model, settings.num_layers, settings.batch_size)
    sago_load = time.perf_counter() - started
    raw_seconds, sago_seconds = float("inf"), float("inf")
    raw_f1: list[float] = []
    sago_f1: list[float] = []
    for _ in range(rounds):
        started = time.perf_counter()
        raw_f1 = raw.score(candidates, references, batch_size=settings.batch_size)[2].tolist()
        raw_seconds = min(raw_seconds, time.perf_counter() - started)
        started = time.perf_counter()
        sago_f1 = sago.f1(candidates, references)
        sago_seconds = min(sago_seconds, time.perf_counter() - started)
    n = len(candidates)
    return (
        RawRun(raw_seconds, n, raw_load, same_scores(raw_f1, stage_f1)),
        RawRun(sago_seconds, n, sago_load, same_scores(sago_f1, stage_f1)),
    )


def same_scores(scores: Sequence[float], stage: Sequence[float]) -> float:
    """The share of ``scores`` within 1e-6 of the stage's."""
    same = sum(abs(a - b) <= 1e-6 for a, b in zip(scores, stage, strict=True))
    return same / max(len(stage), 1)


def bleu_seconds(candidates: list[str], references: list[str]) -> float:
    """Seconds of the stage's BLEU (``sentence_bleu``) over the same pairs."""
    from sago_core.axes.text_similarity import sentence_bleu

    started = time.perf_counter()
    for candidate, reference in zip(candidates, references, strict=True):
        sentence_bleu(candidate, reference)
    return time.perf_counter() - started
