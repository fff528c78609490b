"""GPU check: sago's transformers paths on a random-weight Llama, against the bandwidth limit.

No network: the model is built from a config with random weights and a word-level tokenizer
made in memory (with a chat template), saved to a temp folder and loaded through sago's own
backend. Prints batch-1 and batched decode tokens/s, the analysis pass rate, and the
memory-bandwidth limit for batch-1 decode (model bytes / device bandwidth); and two of
``make bench-paper``'s ratios: the scoring pass over a raw batched forward of the same rows
(``bench/paper_raw.py``), sago's BERTScore over bert_score's own scorer on the same pairs.

    python -m bench.gpu_check --size 1b            # on a GPU machine (bf16)
    python -m bench.gpu_check --size tiny --device cpu   # smoke test anywhere
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

SIZES = {  # hidden, layers, heads, kv heads, intermediate, vocab
    "tiny": (64, 2, 4, 2, 128, 512),
    "1b": (2048, 16, 32, 8, 8192, 32000),
    "3b": (3072, 28, 24, 8, 8192, 32000),
}
BANDWIDTH_GBS = {"H200": 4800.0, "H100": 3350.0, "A100": 2039.0, "L40S": 864.0, "A10": 600.0}
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }} {{ m['content'] }}<|im_end|>"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant {% endif %}"
)


def build_model(size: str, folder: Path) -> int:
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    hidden, layers, heads, kv, inter, vocab = SIZES[size]
    words = {"<|im_end|>": 0, "<|im_start|>": 1, "<unk>": 2}
    words.update({f"w{i}": i for i in range(3, vocab)})
    core = Tokenizer(models.WordLevel(vocab=words, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|im_end|>", unk_token="<unk>"
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        intermediate_size=inter,
        max_position_embeddings=4096,
        eos_token_id=0,
        pad_token_id=0,
        bos_token_id=1,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = LlamaForCausalLM(config).bfloat16()
    model.generation_config.eos_token_id = 0
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return sum(p.numel() * p.element_size() for p in model.parameters())


def bandwidth_gbs(device: str) -> float | None:
    import torch

    if not device.startswith("cuda"):
        return None
    name = torch.cuda.get_device_name(0)
    return next((v for k, v in BANDWIDTH_GBS.items() if k in name), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", choices=sorted(SIZES), default="1b")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args()

    from bench.paper_raw import raw_forward, teacher_forced_rows
    from sago_core.backends.hf import HFBackend
    from sago_core.backends.model_source import LocalModel
    from sago_core.backends.protocol import ScoringRequest

    folder = Path(tempfile.mkdtemp(prefix="sago-gpu-check-"))
    started = time.perf_counter()
    model_bytes = build_model(args.size, folder)
    dtype = "bfloat16" if args.device.startswith("cuda") else "float32"
    backend = HFBackend(LocalModel("dir", str(folder), None, "random"), args.device, dtype)
    print(
        f"model: random Llama {args.size}, {model_bytes / 1e9:.2f} GB in bf16, built and "
        f"loaded in {time.perf_counter() - started:.1f} s on {backend.describe()['device']}"
    )
    # Random words never emit the EOS id, so every row decodes exactly new_tokens tokens.
    prompts = [
        " ".join(f"w{(7 * i + 13 * j) % 500 + 3}" for j in range(40)) for i in range(args.batch)
    ]
    backend.generate(prompts[:2], 4, 2)  # warm-up (kernels, allocator)

    def decode_rate(batch: list[str], batch_size: int) -> tuple[float, int]:
        _sync(args.device)
        t0 = time.perf_counter()
        out = backend.generate(batch, args.new_tokens, batch_size)
        _sync(args.device)
        tokens = sum(len(g.response_token_ids) for g in out)
        return tokens / (time.perf_counter() - t0), tokens

    single, _ = decode_rate(prompts[:1], 1)
    batched, _ = decode_rate(prompts, args.batch)
    generations = backend.generate(prompts, args.new_tokens, args.batch)
    requests = [
        ScoringRequest(p, g.response_token_ids) for p, g in zip(prompts, generations, strict=True)
    ]
    _sync(args.device)
    t0 = time.perf_counter()
    backend.score(requests, args.batch, 65536)
    _sync(args.device)
    seconds = time.perf_counter() - t0
    analysed = (
        sum(len(backend.render_prompt_ids(r.prompt)) + len(r.response_token_ids) for r in requests)
        / seconds
    )

    limit = bandwidth_gbs(args.device)
    raw = raw_forward(
        backend,
        teacher_forced_rows(backend, prompts, [list(r.response_token_ids) for r in requests]),
        args.batch,
        65536,
    )
    print(f"batch-1 decode:   {single:10.1f} tokens/s")
    print(f"batch-{args.batch} decode:  {batched:10.1f} tokens/s ({batched / single:.1f}x batch 1)")
    print(f"analysis pass:    {analysed:10.1f} tokens/s (teacher forcing, all signals)")
    print(
        f"raw forward:      {raw.rate:10.1f} tokens/s (same rows, hidden states, log-probs, "
        f"entropies); scoring-pass ratio sago/raw {analysed / raw.rate:.3f} (target >= 0.8)"
    )
    print(bertscore_ratio([g.response_text for g in generations]))
    if limit:
        bound = limit * 1e9 / model_bytes
        print(
            f"bandwidth limit for batch-1 decode: {bound:.1f} tokens/s "
            f"({limit:.0f} GB/s / {model_bytes / 1e9:.2f} GB); achieved {100 * single / bound:.0f}%"
        )
    else:
        print("bandwidth limit: unknown device (add it to BANDWIDTH_GBS)")


def bertscore_ratio(texts: list[str]) -> str:
    """sago's BERTScore (the embedded MiniLM, fixed batches) over bert_score's own batched
    scorer on the same pairs: each answer against the next one's."""
    from bench.paper_raw import raw_bertscore
    from sago_core.axes.text_similarity import get_bert_scorer
    from sago_core.config import BertScoreSettings, RunConfig

    settings = BertScoreSettings(model="minilm-l6", num_layers=6, semantic_threshold=0.78)
    candidates = [t + f" w{i}" for i, t in enumerate(texts)]  # no identical pair to skip
    references = texts[1:] + texts[:1]
    scorer = get_bert_scorer(settings.model, settings.num_layers, settings.batch_size)
    t0 = time.perf_counter()
    scorer.f1(candidates, references)
    sago = len(candidates) / (time.perf_counter() - t0)
    raw = raw_bertscore(RunConfig(bertscore=settings), candidates, references)
    return (
        f"BERTScore:        {sago:10.1f} pairs/s, bert_score's own {raw.rate:.1f} pairs/s; "
        f"ratio {sago / raw.rate:.3f} (target >= 0.9)"
    )


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()
