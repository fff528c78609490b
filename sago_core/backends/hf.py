"""transformers backend: batched greedy generation and the teacher-forced scoring pass.

Loaded once per worker process (see ``factory.open_backend``) and called with whole batches.
Batches are formed from length-sorted requests to limit padding; results come back in the
caller's order. Generation pads on the left (so new tokens line up), scoring on the right;
both locate the last prompt token from the attention mask, never from pad-token ids (the
embedded model's pad token equals its end-of-sequence token).

Every family is read through its text config and its decoder (``get_text_config``,
``get_decoder``), so multimodal ``...ForConditionalGeneration`` checkpoints (Gemma 3) work
like plain causal LMs. The scoring pass normally runs the decoder alone with hooks that keep
one row per layer, and applies the output head (with the family's final-logit scaling) only
at the response positions. At load a self-check compares that fast path with the model's own
full forward on a short padded batch; where they disagree, the model is scored through its
own forward (``output_hidden_states`` and its own logits), and ``describe()`` says so.

T=0 has one meaning: argmax at every step. The checkpoint's ``generation_config`` (repetition
penalty, top-k, sampling, ...) is replaced by a clean greedy one keeping only its token ids,
unless the user opts into the checkpoint's own defaults (``use_model_defaults``).

Sampling (T > 0) keeps that greedy loop and picks each row's next token itself, in a logits
processor (``RowSampler``): temperature, top-k, top-p, then an exponential race drawn from
the row's own ``torch.Generator`` (seeded with the row's seed, on the model's device); the
chosen token gets score 0 and every other -inf, so argmax takes it. transformers' own
sampling draws every row from one global generator, so a row's answer would change with its
batch companions; here it depends on its own logits and seed only.

Beside this module: ``hf_loading.py`` (placement, the chat template's arguments, the weights,
the decoder's layers and stop tokens), ``hf_decoding.py`` (the greedy config and the final-logit
scaling), ``hf_self_check.py`` (the load-time check of the fast scoring path),
``hf_sampling.py`` (the per-row sampler) and ``hf_hooks.py`` (the self-check's comparison,
rows gathered across devices, the patching hooks).
"""

from __future__ import annotations

import copy
import inspect
import json
import math
import platform
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from sago_core.backends.allocator import tune_heap
from sago_core.backends.gguf_probe import probe_gguf
from sago_core.backends.hf_decoding import decoding_config, effective_decoding, logit_transform
from sago_core.backends.hf_hooks import Patch, patch_hook, rows_at
from sago_core.backends.hf_loading import (
    find_decoder,
    load_pretrained,
    placement_kwargs,
    resolve_chat_template_kwargs,
    stop_ids,
)
from sago_core.backends.hf_prompts import Encoded, PromptEncoder
from sago_core.backends.hf_sampling import SAMPLER, RowSampler, Steps
from sago_core.backends.hf_self_check import self_check
from sago_core.backends.model_source import LocalModel
from sago_core.backends.patching import PatchedScore, PatchRequest
from sago_core.backends.protocol import Generation, Sampling, ScoringRequest, TeacherForced
from sago_core.backends.tensor_ops import (
    last_prompt_index,
    response_logprob_and_entropy,
)
from sago_core.errors import ConfigError, ModelLoadError
from sago_core.progress import counted, each, stepper

if TYPE_CHECKING:
    from sago_core.backends.factory import BackendPlaces
    from sago_core.backends.target import ModelTarget


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


class HFBackend:
    name = "hf"

    def __init__(
        self,
        source: LocalModel,
        device: str = "auto",
        dtype: str = "auto",
        trust_remote_code: bool = False,
        chat_template_kwargs: Sequence[tuple[str, Any]] | None = None,
        use_model_defaults: bool = False,
        devices: int = 1,
    ) -> None:
        """``device`` "auto": the process's GPU when it has one (a worker pinned with
        CUDA_VISIBLE_DEVICES sees exactly one), else the CPU. ``trust_remote_code``: run the
        model repository's own Python code (only for models the user lists in
        ``trust_remote_code``; never by default). ``chat_template_kwargs``: (key, value)
        pairs for the chat template (None: thinking off where the template offers it).
        ``use_model_defaults``: decode with the checkpoint's own generation_config instead of
        plain argmax. ``devices``: GPUs to spread one model over (``device_map="auto"``)."""
        import torch

        tune_heap()  # before generation too: its KV caches fragment a dynamic-threshold heap
        self._torch = torch
        self.source = source
        self.where = str(Path(source.location) / (source.gguf_file or ""))
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        gpus = (
            [
                torch.cuda.get_device_properties(i).total_memory
                for i in range(torch.cuda.device_count())
            ]
            if device != "cpu" and torch.cuda.is_available()
            else []
        )
        kwargs: dict[str, Any] = {"trust_remote_code": trust_remote_code}
        kwargs.update(placement_kwargs(device, devices, gpus))
        if source.gguf_file:
            probe_gguf(Path(source.location) / source.gguf_file)
            kwargs["gguf_file"] = source.gguf_file
        if dtype != "auto":
            kwargs["dtype"] = getattr(torch, dtype)
        elif device != "cpu":
            kwargs["dtype"] = torch.bfloat16
        self.tokenizer, model = load_pretrained(source, kwargs)
        self.devices = devices
        if devices > 1:
            self.model: Any = model
            device = str(next(model.parameters()).device)  # inputs go to the first device
        else:
            self.model = model.to(device)
        self.model.eval()
        self.device = device
        self.text_config = self.model.config.get_text_config(decoder=True)
        self.decoder, self.layers = find_decoder(self.model, self.text_config, self.where)
        self.n_layers = len(self.layers)
        self.head = self.model.get_output_embeddings()
        if self.head is None:
            raise ModelLoadError(f"model {self.where}: no output head (get_output_embeddings)")
        self.altup_index = getattr(self.text_config, "altup_active_idx", 0)
        self.stop_ids = stop_ids(self.model, self.tokenizer, self.where)
        self.pad_id = (
            self.tokenizer.pad_token_id
            if self.tokenizer.pad_token_id is not None
            else min(self.stop_ids)
        )
        self.use_model_defaults = use_model_defaults
        self.checkpoint_generation_config = copy.deepcopy(self.model.generation_config)
        self.generation_config = decoding_config(
            self.checkpoint_generation_config, use_model_defaults, self.stop_ids, self.pad_id
        )
        # generate() fills every unset value from model.generation_config: make it the clean one
        self.model.generation_config = copy.deepcopy(self.generation_config)
        self.chat_template_kwargs = resolve_chat_template_kwargs(
            self.tokenizer.chat_template, chat_template_kwargs, self.where
        )
        self.prompts = PromptEncoder(self.tokenizer, self.chat_template_kwargs, self.where)
        # transformers 5 names the KV-cache argument ``cache``, 4.x ``past_key_values``
        forward = inspect.signature(self.decoder.forward).parameters
        self.cache_arg = "cache" if "cache" in forward else "past_key_values"
        self.logit_transform, self.logit_note = logit_transform(self.text_config)
        self.exact = False  # True: score through the model's own forward (slow path)
        self.use_prefix = True
        self.self_check = self_check(self)

    # ---------------------------------------------------------------- public helpers

    def describe(self) -> dict[str, str]:
        import torch
        import transformers

        description = {
            "backend": self.name,
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "device": self.device if self.device != "cpu" else f"cpu ({platform.machine()})",
            "dtype": str(next(self.model.parameters()).dtype).removeprefix("torch."),
            "layers": str(self.n_layers),
            "architecture": type(self.model).__name__,
            "decoding": json.dumps(
                effective_decoding(self.generation_config, self.use_model_defaults),
                sort_keys=True,
                default=str,
            ),
            "chat_template_kwargs": json.dumps(self.chat_template_kwargs, sort_keys=True),
            "stop_token_ids": json.dumps(self.stop_token_ids()),
            "scoring_path": self.self_check,
        }
        if self.devices > 1:
            description["devices"] = str(self.devices)
        return description

    def stop_token_ids(self) -> list[int]:
        """Token ids that end a response (generation_config's and the tokenizer's eos)."""
        return sorted(self.stop_ids)

    def encode_response(self, text: str) -> tuple[int, ...] | None:
        return tuple(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt_lengths(self, prompts: Sequence[str]) -> list[int] | None:
        return [len(self.render_prompt_ids(p)) for p in prompts]

    def context_window(self) -> int | None:
        window = getattr(self.text_config, "max_position_embeddings", None)
        return int(window) if window else None

    def render_prompt(self, prompt: str) -> str | None:
        """The prompt as text after the chat template (None: the model has none)."""
        return self.prompts.render(prompt)

    def render_prompt_ids(self, prompt: str) -> list[int]:
        """Token ids of the prompt as the model sees it: chat template and assistant header
        (what another engine must be fed to see the same prompt)."""
        return list(self._encode(prompt).ids)

    def user_text_end(self, prompt: str) -> int:
        """Index, in ``render_prompt_ids(prompt)``, of the last token of the user's text."""
        return self._encode(prompt).user_end

    def _encode(self, prompt: str) -> Encoded:
        return self.prompts.encode(prompt)

    # ---------------------------------------------------------------- generation

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
            if token in self.stop_ids:
                return tuple(new_ids[: position + 1]), "stop"
        return tuple(new_ids), "length"

    def generate(
        self,
        prompts: Sequence[str],
        max_new_tokens: int,
        batch_size: int,
        sampling: Sampling | None = None,
    ) -> list[Generation]:
        from transformers import LogitsProcessorList, StoppingCriteriaList

        encoded = [self.render_prompt_ids(p) for p in prompts]
        results: list[Generation | None] = [None] * len(prompts)
        config = copy.deepcopy(self.generation_config)
        config.max_new_tokens = max_new_tokens
        config.max_length = None
        with self._torch.inference_mode():
            batches = _length_sorted_batches([len(e) for e in encoded], batch_size)
            for batch in counted(batches, len(prompts)):
                ids, mask = self._pad([encoded[i] for i in batch], side="left")
                sampler: dict[str, Any] = {}
                if sampling is not None:
                    row_sampler = RowSampler(sampling.rows(batch))
                    sampler["logits_processor"] = LogitsProcessorList([row_sampler])
                step = stepper(len(batch), max_new_tokens)
                if step is not None:
                    sampler["stopping_criteria"] = StoppingCriteriaList([Steps(step)])
                out = self.model.generate(
                    input_ids=ids, attention_mask=mask, generation_config=config, **sampler
                )
                for row, index in enumerate(batch):
                    token_ids, reason = self._cut(out[row, ids.shape[1] :].tolist())
                    text = self.tokenizer.decode(token_ids, skip_special_tokens=True).strip()
                    applied = (
                        sampling.record(index, sampler=SAMPLER, reproducible=True)
                        if sampling is not None
                        else None
                    )
                    results[index] = Generation(text, token_ids, reason, sampling=applied)
        return [r for r in results if r is not None]

    # ---------------------------------------------------------------- scoring

    def _pick(self, hidden: Any) -> Any:
        """A layer's (B, S, d) state; AltUp models (Gemma 3n) stack (streams, B, S, d), and
        the active stream is the one the model carries forward."""
        return hidden[self.altup_index] if hidden.dim() == 4 else hidden

    def _forward(
        self,
        ids: Any,
        mask: Any,
        positions: list[Any],
        prefix: Any,
        exact: bool,
        patch: Patch | None = None,
    ) -> tuple[list[Any], Any, Any]:
        """(B, L, d) states at each set of ``positions`` for every decoder layer, the final
        normed states (B, S, d) and, on the exact path, the model's own logits (B, S, V).

        Fast path: hooks keep only the needed rows of each layer's output, the last layer is
        the decoder's normed output, exactly as ``output_hidden_states`` reports it. Exact
        path: the model's own forward with ``output_hidden_states``. ``prefix``: a KV cache
        of tokens shared by every row, already computed (``ids`` then start after it).
        ``patch``: layer outputs replaced at ``positions[0]`` (hooks registered first, so
        every later hook and layer sees the patched state), on either path."""
        torch = self._torch
        rows = torch.arange(ids.shape[0], device=ids.device)
        patching = (
            [
                layer.register_forward_hook(patch_hook(k, patch, rows, positions[0]))
                for k, layer in enumerate(self.layers, start=1)
            ]
            if patch is not None
            else []
        )
        try:
            return self._forward_hooked(ids, mask, positions, prefix, exact, rows)
        finally:
            for handle in patching:
                handle.remove()

    def _forward_hooked(
        self, ids: Any, mask: Any, positions: list[Any], prefix: Any, exact: bool, rows: Any
    ) -> tuple[list[Any], Any, Any]:
        torch = self._torch
        kwargs: dict[str, Any] = {"input_ids": ids, "attention_mask": mask}
        if prefix is not None:
            cache = copy.deepcopy(prefix)  # the forward appends to it
            cache.batch_repeat_interleave(ids.shape[0])
            kwargs[self.cache_arg] = cache
            kwargs["attention_mask"] = torch.cat(
                [torch.ones_like(mask[:, :1]).expand(-1, cache.get_seq_length()), mask], dim=1
            )
        finals: list[Any] = []

        def keep_final(module: Any, inputs: Any, output: Any) -> None:
            finals.append(
                output.last_hidden_state if hasattr(output, "last_hidden_state") else output[0]
            )

        if exact:
            handle = self.decoder.register_forward_hook(keep_final)
            try:
                out = self.model(**kwargs, output_hidden_states=True, use_cache=False)
            finally:
                handle.remove()
            final = finals[-1]
            layers = [self._pick(h) for h in out.hidden_states[1 : self.n_layers]] + [final]
            states = [torch.stack([rows_at(h, rows, p) for h in layers], dim=1) for p in positions]
            return states, final, out.logits
        captured: list[list[Any]] = [[] for _ in positions]

        def keep_rows(module: Any, inputs: Any, output: Any) -> None:
            hidden = self._pick(output[0] if isinstance(output, tuple) else output)
            for store, p in zip(captured, positions, strict=True):
                store.append(rows_at(hidden, rows, p))

        handles = [layer.register_forward_hook(keep_rows) for layer in self.layers[:-1]]
        try:
            out = self.decoder(**kwargs, use_cache=prefix is not None)
        finally:
            for handle in handles:
                handle.remove()
        final = out.last_hidden_state
        states = []
        for store, p in zip(captured, positions, strict=True):
            store.append(rows_at(final, rows, p))
            states.append(torch.stack(store, dim=1))
        return states, final, None

    def _shared_prefix(
        self,
        rows: list[list[int]],
        prompt_lengths: list[int],
        user_ends: Sequence[int] | None = None,
    ) -> Any:
        """KV cache of the tokens every row starts with (the chat template's system header),
        or None. Capped so every row's last prompt token, and the last token of its user
        text (``user_ends``), come after it."""
        limit = min(prompt_lengths) - 1
        if user_ends:
            limit = min(limit, min(user_ends))
        first, n = rows[0], 0
        while n < limit and all(len(r) > n and r[n] == first[n] for r in rows):
            n += 1
        if n < MIN_SHARED_PREFIX or self.exact or not self.use_prefix:
            return None
        ids = self._torch.tensor([first[:n]], device=self.device)
        out = self.decoder(input_ids=ids, use_cache=True)
        return getattr(out, "cache", None) or getattr(out, "past_key_values", None)

    def _score_rows(
        self,
        encoded: list[Encoded],
        rows: list[list[int]],
        n_responses: list[int],
        exact: bool,
        batch_size: int | None = None,
        max_batch_tokens: int | None = None,
        patches: Sequence[tuple[int, Any | None]] | None = None,
    ) -> Iterator[tuple[int, Any, Any, Any | None, Any | None]]:
        """Per row, batch by batch: (index, states (L, d) at the last prompt token, states at
        the user's last token, response logits (n, vocab) float32 or None without response,
        and with ``patches`` every layer's raw output at the last prompt token, else None).
        A generator, so each batch's logits are dropped once the caller has reduced them.
        ``patches``: per row (layer 1..L or 0 for none, the state put there)."""
        torch = self._torch
        n = len(rows)
        prompt_lengths = [len(e.ids) for e in encoded]
        user_ends = [e.user_end for e in encoded]
        prefix = None if exact else self._shared_prefix(rows, prompt_lengths, user_ends)
        skip = prefix.get_seq_length() if prefix is not None else 0
        lengths = [len(r) - skip for r in rows]
        for batch in _length_sorted_batches(lengths, batch_size or n, max_batch_tokens):
            ids, mask = self._pad([rows[i][skip:] for i in batch], side="right")
            n_prompt = torch.tensor([prompt_lengths[i] - skip for i in batch])
            last = last_prompt_index(mask.cpu(), n_prompt, side="right").to(ids.device)
            user = torch.tensor([encoded[i].user_end - skip for i in batch], device=ids.device)
            patch = (
                Patch([patches[i][0] for i in batch], [patches[i][1] for i in batch], [])
                if patches is not None
                else None
            )
            states, final, logits = self._forward(ids, mask, [last, user], prefix, exact, patch)
            raw = torch.stack(patch.captured, dim=1) if patch is not None else None
            for row, index in enumerate(batch):
                start, n_resp = prompt_lengths[index] - skip, n_responses[index]
                row_logits = None
                if n_resp > 0:
                    # Position t predicts token t+1: response tokens are predicted by the
                    # states at start-1 .. start+n_resp-2. Only those rows get logits.
                    span = slice(start - 1, start + n_resp - 1)
                    if logits is not None:
                        row_logits = logits[row, span].float()
                    else:
                        head_out = self.head(final[row, span].to(self.head.weight.device))
                        if self.logit_transform is not None:
                            head_out = self.logit_transform(head_out)
                        row_logits = head_out.float()
                yield (
                    index,
                    states[0][row],
                    states[1][row],
                    row_logits,
                    raw[row] if raw is not None else None,
                )

    def score(
        self,
        requests: Sequence[ScoringRequest],
        batch_size: int,
        max_batch_tokens: int | None = None,
    ) -> list[TeacherForced]:
        """Teacher-forced pass. ``hidden``: states at the rendered prompt's last token (where
        the answer starts); ``hidden_user``: at the last token of the user's own text."""
        torch = self._torch
        if not requests:
            return []
        encoded = [self._encode(r.prompt) for r in requests]
        rows = [e.ids + list(r.response_token_ids) for e, r in zip(encoded, requests, strict=True)]
        n_resp = [len(r.response_token_ids) for r in requests]
        results: list[TeacherForced | None] = [None] * len(requests)
        # a row past the model's own context (a variant too long to answer, its base answer
        # forced under it) is missing with its reason: positions past it are untrained
        window = self.context_window()
        fits = [i for i, row in enumerate(rows) if window is None or len(row) <= window]
        for i in sorted(set(range(len(rows))) - set(fits)):
            results[i] = TeacherForced(
                None,
                None,
                None,
                0,
                missing_reason=f"prompt and answer take {len(rows[i])} tokens, past the "
                f"model's context of {window} tokens",
            )
        with torch.inference_mode():
            scored = (
                ()
                if not fits
                else self._score_rows(
                    [encoded[i] for i in fits],
                    [rows[i] for i in fits],
                    [n_resp[i] for i in fits],
                    self.exact,
                    batch_size,
                    max_batch_tokens,
                )
            )
            for place, hidden_t, user_t, logits, _ in each(scored, len(fits)):
                index = fits[place]
                hidden = hidden_t.float().cpu().numpy().astype(np.float32)
                user = user_t.float().cpu().numpy().astype(np.float32)
                if logits is None:
                    results[index] = TeacherForced(hidden, 0.0, None, 0, hidden_user=user)
                    continue
                ids = requests[index].response_token_ids
                target = torch.tensor(ids, device=logits.device)
                logprob, entropy = response_logprob_and_entropy(logits, target)
                results[index] = TeacherForced(
                    hidden, logprob, entropy, n_resp[index], hidden_user=user
                )
        return [r for r in results if r is not None]

    # ---------------------------------------------------------------- activation patching

    def patch(
        self,
        requests: Sequence[PatchRequest],
        batch_size: int,
        max_batch_tokens: int | None = None,
    ) -> list[PatchedScore]:
        """Teacher-forced forwards with one layer's output at the last prompt token replaced
        (``PatchRequest``), through the scoring pass itself (same rendering, batching,
        padding, prefix cache and head), so the log-probabilities are those of the Prob
        axis. Rows with different layers share a batch: each layer's hook patches only its
        own rows."""
        torch = self._torch
        if not requests:
            return []
        for r in requests:
            if r.layer is not None and not 1 <= r.layer <= self.n_layers:
                raise ValueError(f"patch layer {r.layer} is outside 1..{self.n_layers}")
            if r.layer is not None and r.state is None:
                raise ValueError(f"patch at layer {r.layer} without a state")
        encoded = [self._encode(r.prompt) for r in requests]
        rows = [e.ids + list(r.response_token_ids) for e, r in zip(encoded, requests, strict=True)]
        n_resp = [len(r.response_token_ids) for r in requests]
        patches = [
            (r.layer or 0, torch.from_numpy(np.asarray(r.state)) if r.layer else None)
            for r in requests
        ]
        results: list[PatchedScore | None] = [None] * len(requests)
        with torch.inference_mode():
            scored = self._score_rows(
                encoded, rows, n_resp, self.exact, batch_size, max_batch_tokens, patches
            )
            for index, _, _, logits, raw in scored:
                assert raw is not None  # asked for with patches
                states = raw.float().cpu().numpy().astype(np.float32)
                if logits is None:  # nothing scored: not a log-probability of 0
                    results[index] = PatchedScore(float("nan"), None, states)
                    continue
                ids = torch.tensor(requests[index].response_token_ids, device=logits.device)
                logprob, _ = response_logprob_and_entropy(logits, ids)
                first = torch.log_softmax(logits[0].float(), dim=-1).cpu().numpy()
                results[index] = PatchedScore(logprob, first.astype(np.float32), states)
        missing = [i for i, r in enumerate(results) if r is None]
        if missing:  # every request has its row, or later rows would shift onto others
            raise RuntimeError(f"the scoring pass returned no row for patch requests {missing}")
        return [r for r in results if r is not None]


def open_target(
    target: ModelTarget, places: BackendPlaces, api_key: str | None, device: str
) -> HFBackend:
    """The ``hf`` backend's builder (registry/backends.py): a transformers engine."""
    if target.source is None:
        raise ConfigError(f"model {target.spec!r} has no resolved weights")
    return HFBackend(
        target.source,
        device=device,
        trust_remote_code=target.trust_remote_code,
        chat_template_kwargs=target.chat_template_kwargs,
        use_model_defaults=target.use_model_defaults,
        devices=target.devices,
    )
