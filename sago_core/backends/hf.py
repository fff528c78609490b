"""transformers backend: batched greedy generation and the teacher-forced scoring pass.

Loaded once per worker process (see ``factory.get_backend``) and called with whole batches.
Batches are formed from length-sorted requests to limit padding; results come back in the
caller's order. Generation pads on the left (so new tokens line up), scoring on the right;
both locate the last prompt token from the attention mask, never from pad-token ids (the
embedded model's pad token equals its end-of-sequence token).
"""

from __future__ import annotations

import copy
import inspect
import math
import platform
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sago_core.backends.gguf_probe import probe_gguf
from sago_core.backends.model_source import LocalModel
from sago_core.backends.protocol import Generation, ScoringRequest, TeacherForced
from sago_core.backends.tensor_ops import (
    last_prompt_index,
    response_logprob_and_entropy,
)
from sago_core.errors import ModelLoadError


def _length_sorted_batches(
    lengths: Sequence[int], batch_size: int, max_tokens: int | None = None
) -> Iterator[list[int]]:
    """Batches of similar length: at most ``batch_size`` rows, evenly sized, and, when given,
    at most ``max_tokens`` padded tokens (rows x longest row): long rows get smaller batches."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    # Even sizes (66 rows at 32 -> 22, 22, 22, not 32, 32, 2): a nearly empty last batch
    # costs as many decode steps as a full one.
    cap = math.ceil(len(order) / math.ceil(len(order) / batch_size)) if order else batch_size
    batch: list[int] = []
    for index in order:
        width = lengths[index]  # ascending order: the newest row is the longest
        too_many = len(batch) >= cap
        too_wide = max_tokens is not None and (len(batch) + 1) * width > max_tokens
        if batch and (too_many or too_wide):
            yield batch
            batch = []
        batch.append(index)
    if batch:
        yield batch


# Below this many shared tokens a prefix forward saves less than it costs.
MIN_SHARED_PREFIX = 8


def load_pretrained(source: LocalModel, kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """Tokenizer and model; a folder that fails to load is a typed error naming it."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    where = Path(source.location) / (source.gguf_file or "")
    tokenizer_kwargs = {k: v for k, v in kwargs.items() if k != "dtype"}
    try:
        tokenizer = AutoTokenizer.from_pretrained(source.location, **tokenizer_kwargs)
        model = AutoModelForCausalLM.from_pretrained(source.location, **kwargs)
    except Exception as exc:  # any failure to load (safetensors, tokenizers, ...) is the folder's
        text = str(exc).strip()
        message = text.splitlines()[0][:300] if text else type(exc).__name__
        raise ModelLoadError(f"model {where} could not be loaded: {message}") from exc
    return tokenizer, model


class HFBackend:
    name = "hf"

    def __init__(
        self,
        source: LocalModel,
        device: str = "auto",
        dtype: str = "auto",
        trust_remote_code: bool = False,
    ) -> None:
        """``device`` "auto": the process's GPU when it has one (a worker pinned with
        CUDA_VISIBLE_DEVICES sees exactly one), else the CPU. ``trust_remote_code``: run the
        model repository's own Python code (only for models the user lists in
        ``trust_remote_code``; never by default)."""
        import torch

        self._torch = torch
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        kwargs: dict[str, Any] = {"trust_remote_code": trust_remote_code}
        if source.gguf_file:
            probe_gguf(Path(source.location) / source.gguf_file)
            kwargs["gguf_file"] = source.gguf_file
        if dtype != "auto":
            kwargs["dtype"] = getattr(torch, dtype)
        elif device != "cpu":
            kwargs["dtype"] = torch.bfloat16
        self.tokenizer, model = load_pretrained(source, kwargs)
        self.model: Any = model.to(device)
        self.model.eval()
        self.device = device
        self.source = source
        self.eos_ids = self._eos_ids()
        self.pad_id = (
            self.tokenizer.pad_token_id
            if self.tokenizer.pad_token_id is not None
            else min(self.eos_ids)
        )
        self.softcap = getattr(self.model.config, "final_logit_softcapping", None)
        # transformers 5 names the KV-cache argument ``cache``, 4.x ``past_key_values``
        forward = inspect.signature(self.model.base_model.forward).parameters
        self.cache_arg = "cache" if "cache" in forward else "past_key_values"

    def _eos_ids(self) -> set[int]:
        ids = self.model.generation_config.eos_token_id
        if ids is None:
            ids = self.tokenizer.eos_token_id
        return set(ids if isinstance(ids, list) else [ids])

    def describe(self) -> dict[str, str]:
        import torch
        import transformers

        return {
            "backend": self.name,
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "device": self.device if self.device != "cpu" else f"cpu ({platform.machine()})",
            "dtype": str(next(self.model.parameters()).dtype).removeprefix("torch."),
            "layers": str(self.model.config.num_hidden_layers),
        }

    def encode_response(self, text: str) -> tuple[int, ...] | None:
        return tuple(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt_lengths(self, prompts: Sequence[str]) -> list[int] | None:
        return [len(self.encode_prompt(p)) for p in prompts]

    def context_window(self) -> int | None:
        window = getattr(self.model.config, "max_position_embeddings", None)
        return int(window) if window else None

    def encode_prompt(self, prompt: str) -> list[int]:
        """Token ids of the prompt as the model sees it: chat template and assistant header."""
        if self.tokenizer.chat_template:
            text = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False
            )
            return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        return list(self.tokenizer(prompt, add_special_tokens=True)["input_ids"])

    def _pad(self, rows: list[list[int]], side: str) -> tuple[Any, Any]:
        torch = self._torch
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, row in enumerate(rows):
            span = slice(width - len(row), width) if side == "left" else slice(0, len(row))
            ids[i, span] = torch.tensor(row, dtype=torch.long)
            mask[i, span] = 1
        return ids.to(self.device), mask.to(self.device)

    def _cut(self, new_ids: list[int]) -> tuple[tuple[int, ...], str]:
        for position, token in enumerate(new_ids):
            if token in self.eos_ids:
                return tuple(new_ids[: position + 1]), "stop"
        return tuple(new_ids), "length"

    def generate(
        self, prompts: Sequence[str], max_new_tokens: int, batch_size: int
    ) -> list[Generation]:
        encoded = [self.encode_prompt(p) for p in prompts]
        results: list[Generation | None] = [None] * len(prompts)
        with self._torch.inference_mode():
            for batch in _length_sorted_batches([len(e) for e in encoded], batch_size):
                ids, mask = self._pad([encoded[i] for i in batch], side="left")
                out = self.model.generate(
                    input_ids=ids,
                    attention_mask=mask,
                    do_sample=False,
                    max_new_tokens=max_new_tokens,
                    pad_token_id=self.pad_id,
                )
                for row, index in enumerate(batch):
                    token_ids, reason = self._cut(out[row, ids.shape[1] :].tolist())
                    text = self.tokenizer.decode(token_ids, skip_special_tokens=True).strip()
                    results[index] = Generation(text, token_ids, reason)
        return [r for r in results if r is not None]

    def _last_prompt_states(
        self, ids: Any, mask: Any, positions: Any, prefix: Any = None
    ) -> tuple[Any, Any]:
        """(B, L, d) hidden states at ``positions`` for every layer, and the final states.

        Hooks keep only the needed row of each layer's output instead of every position of
        every layer; the last layer uses the model's normed output, exactly as
        ``output_hidden_states`` reports it. ``prefix``: a KV cache of tokens shared by every
        row, already computed (positions and ``ids`` then start after it).
        """
        torch = self._torch
        base = self.model.base_model
        layers = getattr(base, "layers", None)
        rows = torch.arange(ids.shape[0])
        kwargs: dict[str, Any] = {"input_ids": ids, "attention_mask": mask}
        if prefix is not None:
            cache = copy.deepcopy(prefix)  # the forward appends to it
            cache.batch_repeat_interleave(ids.shape[0])
            kwargs[self.cache_arg] = cache
            kwargs["attention_mask"] = torch.cat(
                [torch.ones_like(mask[:, :1]).expand(-1, cache.get_seq_length()), mask], dim=1
            )
        if layers is None:  # unknown architecture: fall back to all hidden states
            out = base(**kwargs, output_hidden_states=True)
            states = torch.stack([h[rows, positions] for h in out.hidden_states[1:]], dim=1)
            return states, out.last_hidden_state
        captured: list[Any] = []

        def keep_rows(module: Any, inputs: Any, output: Any) -> None:
            hidden = output[0] if isinstance(output, tuple) else output
            captured.append(hidden[rows, positions])

        count = self.model.config.num_hidden_layers
        handles = [layer.register_forward_hook(keep_rows) for layer in layers[: count - 1]]
        try:
            out = base(**kwargs)
        finally:
            for handle in handles:
                handle.remove()
        captured.append(out.last_hidden_state[rows, positions])
        return torch.stack(captured, dim=1), out.last_hidden_state

    def _shared_prefix(self, rows: list[list[int]], prompt_lengths: list[int]) -> Any:
        """KV cache of the tokens every row starts with (the chat template's system header),
        or None. Capped so every row's last prompt token comes after it."""
        first, limit, n = rows[0], min(prompt_lengths) - 1, 0
        while n < limit and all(len(r) > n and r[n] == first[n] for r in rows):
            n += 1
        if n < MIN_SHARED_PREFIX or getattr(self.model.base_model, "layers", None) is None:
            return None
        ids = self._torch.tensor([first[:n]], device=self.device)
        out = self.model.base_model(input_ids=ids, use_cache=True)
        return getattr(out, "cache", None) or getattr(out, "past_key_values", None)

    def score(
        self,
        requests: Sequence[ScoringRequest],
        batch_size: int,
        max_batch_tokens: int | None = None,
    ) -> list[TeacherForced]:
        torch = self._torch
        prompts = [self.encode_prompt(r.prompt) for r in requests]
        rows = [p + list(r.response_token_ids) for p, r in zip(prompts, requests, strict=True)]
        results: list[TeacherForced | None] = [None] * len(requests)
        head = self.model.get_output_embeddings()
        with torch.inference_mode():
            prefix = self._shared_prefix(rows, [len(p) for p in prompts]) if rows else None
            skip = prefix.get_seq_length() if prefix is not None else 0
            lengths = [len(r) - skip for r in rows]
            for batch in _length_sorted_batches(lengths, batch_size, max_batch_tokens):
                ids, mask = self._pad([rows[i][skip:] for i in batch], side="right")
                prompt_lengths = torch.tensor([len(prompts[i]) - skip for i in batch])
                last = last_prompt_index(mask.cpu(), prompt_lengths, side="right").to(self.device)
                states, final = self._last_prompt_states(ids, mask, last, prefix)
                for row, index in enumerate(batch):
                    hidden = states[row].float().cpu().numpy().astype(np.float32)
                    n_prompt = len(prompts[index]) - skip
                    n_resp = len(requests[index].response_token_ids)
                    if n_resp == 0:
                        results[index] = TeacherForced(hidden, 0.0, None, 0)
                        continue
                    # Position t predicts token t+1: response tokens are predicted by the
                    # states at n_prompt-1 .. n_prompt+n_resp-2. Only those rows get logits.
                    logits = head(final[row, n_prompt - 1 : n_prompt + n_resp - 1]).float()
                    if self.softcap:
                        logits = torch.tanh(logits / self.softcap) * self.softcap
                    target = ids[row, n_prompt : n_prompt + n_resp]
                    logprob, entropy = response_logprob_and_entropy(logits, target)
                    results[index] = TeacherForced(hidden, logprob, entropy, n_resp)
        return [r for r in results if r is not None]
