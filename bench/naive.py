"""The naive pipeline peers write: batch-1 generate, three forwards per sample, BERTScore per
pair, the model reloaded for every dataset.

``python -m bench.naive WORKDIR`` reads the workload and writes naive/ with generations,
deltas and timings. The math after the model calls (cosines, BLEU, mirroring, deltas) is
sago's own, so any difference in results comes from the model-calling strategy alone.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from bench.timing import Stopwatch
from bench.workload import BERTSCORE, Workload
from sago_core.artifacts.schemas import ANALYSIS, DELTAS, GENERATIONS, PAIRS, Schema, conform
from sago_core.artifacts.store import write_parquet
from sago_core.axes.activation import layer_cosines
from sago_core.axes.reasoning import answer_text
from sago_core.axes.text_similarity import sentence_bleu
from sago_core.backends.model_source import (
    parse_model_spec,
    resolve_bertscore_model,
    resolve_local_model,
)
from sago_core.scoring.deltas import compute_deltas
from sago_core.stages.generation import generation_requests
from sago_core.stages.pairs import detect_mirroring_frame
from sago_core.vocabulary import BASE_VARIANT_ID


def load_tokenizer(model_spec: str) -> Any:
    from transformers import AutoTokenizer

    source = resolve_local_model(parse_model_spec(model_spec).model_id)
    return AutoTokenizer.from_pretrained(source.location, gguf_file=source.gguf_file)


def load_model(model_spec: str) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM

    source = resolve_local_model(parse_model_spec(model_spec).model_id)
    model = AutoModelForCausalLM.from_pretrained(source.location, gguf_file=source.gguf_file)
    return model.eval(), load_tokenizer(model_spec)


def prompt_ids(tokenizer: Any, prompt: str) -> list[int]:
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False
    )
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def generate_one(model: Any, tokenizer: Any, prompt: str, max_new_tokens: int) -> list[int]:
    import torch

    ids = torch.tensor([prompt_ids(tokenizer, prompt)])
    out = model.generate(
        input_ids=ids,
        attention_mask=torch.ones_like(ids),
        do_sample=False,
        max_new_tokens=max_new_tokens,
        pad_token_id=tokenizer.pad_token_id,
    )[0, ids.shape[1] :].tolist()
    eos = model.generation_config.eos_token_id
    eos_ids = set(eos if isinstance(eos, list) else [eos])
    for position, token in enumerate(out):
        if token in eos_ids:
            return out[: position + 1]
    return out


def analyse_one(model: Any, tokenizer: Any, prompt: str, response: list[int]) -> dict:
    """Three separate forwards, full-vocabulary float32 log-softmax over every position."""
    import torch

    p_ids = prompt_ids(tokenizer, prompt)
    full = torch.tensor([p_ids + response])
    n = len(p_ids)
    states = model(input_ids=torch.tensor([p_ids]), output_hidden_states=True).hidden_states
    hidden = torch.stack([h[0, -1] for h in states[1:]]).float().numpy()
    logp = torch.log_softmax(model(input_ids=full).logits[0].float(), dim=-1)
    logprob = float(sum(logp[n - 1 + t, tok] for t, tok in enumerate(response)))
    logp_again = torch.log_softmax(model(input_ids=full).logits[0].float(), dim=-1)
    entropy = -(logp_again.exp() * logp_again).sum(-1)[n - 1 : n - 1 + len(response)]
    return {"hidden": hidden, "logprob": logprob, "mean_entropy": float(entropy.mean())}


def run(workdir: Path) -> None:
    import torch
    from bert_score import score as bert_score

    torch.set_grad_enabled(False)
    spec, prompts, variants = Workload.load(workdir)
    requests = generation_requests(prompts, variants)
    requests = requests.with_columns(pl.lit(spec.model).alias("model"))
    watch = Stopwatch()
    responses: dict[tuple[str, str, str], list[int]] = {}
    analysis_rows = []
    tokens = 0
    for dataset in requests["dataset"].unique(maintain_order=True).to_list():
        with watch.stage("load"):
            model, tokenizer = load_model(spec.model)  # reloaded for every dataset
        rows = requests.filter(pl.col("dataset") == dataset).to_dicts()
        with watch.stage("generation"):
            for row in rows:
                ids = generate_one(model, tokenizer, row["prompt_text"], spec.max_new_tokens)
                responses[(row["dataset"], row["prompt_id"], row["variant_id"])] = ids
                tokens += len(ids)
        with watch.stage("analysis"):
            base_states = {}
            for row in sorted(rows, key=lambda r: r["variant_id"] != BASE_VARIANT_ID):
                base = responses[(row["dataset"], row["prompt_id"], BASE_VARIANT_ID)]
                out = analyse_one(model, tokenizer, row["prompt_text"], base)
                if row["variant_id"] == BASE_VARIANT_ID:
                    base_states[row["prompt_id"]] = out["hidden"]
                cos = layer_cosines(out["hidden"], base_states[row["prompt_id"]])
                analysis_rows.append(
                    {
                        **row,
                        "layer_cosines": cos.tolist(),
                        "act_cos_mean": float(np.mean(cos)),
                        "logprob": out["logprob"],
                        "mean_entropy": out["mean_entropy"],
                        "n_response_tokens": len(base),
                        "missing_reason": None,
                    }
                )
    decode = load_tokenizer(spec.model).decode
    generations = generations_frame(
        requests.with_columns(
            pl.Series(
                "response_token_ids",
                [responses[k] for k in _keys(requests)],
                dtype=pl.List(pl.Int32),
            ),
            pl.Series(
                "response_text",
                [decode(responses[k], skip_special_tokens=True).strip() for k in _keys(requests)],
            ),
            pl.lit("n/a").alias("finish_reason"),
        )
    )
    analysis = fill_schema(pl.DataFrame(analysis_rows), ANALYSIS, {})
    with watch.stage("metrics"):
        pairs = naive_pairs(generations, bert_score)
        mirroring = detect_mirroring_frame(generations)
        deltas = compute_deltas(generations, analysis, pairs, mirroring)
    folder = workdir / "naive"
    write_parquet(generations, folder / "generations.parquet", GENERATIONS)
    write_parquet(deltas, folder / "deltas.parquet", DELTAS)
    watch.write(folder / "timings.json", tokens=tokens)


def naive_engine() -> str:
    import torch
    import transformers

    return json.dumps(
        {
            "backend": "naive (bench)",
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "device": "cpu",
        },
        sort_keys=True,
    )


def fill_schema(frame: pl.DataFrame, schema: Schema, known: dict[str, pl.Expr]) -> pl.DataFrame:
    """``frame`` as an artifact of ``schema``, whatever columns the schema has gained.

    The naive pipeline builds only the columns it computes. Each other schema column gets its
    value from ``known`` when the bench knows how to derive it, else null of its declared
    type, so a column added to a schema later does not stop the bench.
    """
    fill = [
        known.get(name, pl.lit(None)).cast(dtype).alias(name)
        for name, dtype in schema.items()
        if name not in frame.columns
    ]
    return conform(frame.with_columns(fill), schema)


def generations_frame(frame: pl.DataFrame) -> pl.DataFrame:
    """The naive responses as a GENERATIONS artifact: no failures, the answer derived from
    the response as sago derives it, the naive engine."""
    answers = [answer_text(r) for r in frame["response_text"].to_list()]
    frame = frame.with_columns(pl.Series("answer_text", answers, dtype=pl.String))
    known = {"failure_reason": pl.lit(None, dtype=pl.String), "engine": pl.lit(naive_engine())}
    return fill_schema(frame, GENERATIONS, known)


def _keys(frame: pl.DataFrame) -> list[tuple[str, str, str]]:
    return list(frame.select("dataset", "prompt_id", "variant_id").iter_rows())


def naive_pairs(generations: pl.DataFrame, bert_score: Any) -> pl.DataFrame:
    """BLEU and bert_score.score() called once per pair (it builds its model every call)."""
    model, layers = BERTSCORE
    base = {
        (r["dataset"], r["prompt_id"]): r["answer_text"]
        for r in generations.filter(pl.col("variant_id") == BASE_VARIANT_ID).iter_rows(named=True)
    }
    rows = []
    for r in generations.filter(pl.col("variant_id") != BASE_VARIANT_ID).iter_rows(named=True):
        ref = base[(r["dataset"], r["prompt_id"])]
        cand = r["answer_text"]
        bleu = bert = None
        if cand is not None and ref is not None:  # no answer (reasoning never closed): null
            bleu = sentence_bleu(cand, ref)
            if cand.strip() and ref.strip():
                _, _, f1 = bert_score(
                    [cand], [ref], model_type=resolve_bertscore_model(model), num_layers=layers
                )
                bert = float(f1[0])
            else:
                bert = 1.0 if cand == ref else 0.0
        rows.append(
            {
                **{k: r[k] for k in ("model", "dataset", "prompt_id", "variant_id")},
                "bleu": bleu,
                "bert_f1": bert,
            }
        )
    return conform(pl.DataFrame(rows), PAIRS)


if __name__ == "__main__":
    run(Path(sys.argv[1]))
