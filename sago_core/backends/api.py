"""API models through LiteLLM: async with a concurrency cap, typed failures, retries that
honour Retry-After, a per-run budget, and a disk cache of validated answers only.

Greedy (temperature 0), one user message per prompt, the provider's chat template. Cache key:
(model, base URL, request parameters, messages); a cached answer is reused by any run and
never spends budget. Sampled (T > 0): ``temperature``, ``top_p`` and the row's ``seed`` are
sent (and keyed); ``top_k`` is refused unless LiteLLM lists it for the provider. A provider
that takes no seed gets none (its rows are still keyed by their seeds, so sample s of a text
is never served sample 0's cached answer), and its answers are recorded as not reproducible
(a seed is best effort even where taken: the served record's ``system_fingerprint`` tells
when the serving system changed). What an API cannot give is missing with a reason: hidden
states (Act) and teacher-forced log-probabilities of a given answer (Prob, Ent) need the
weights.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sago_core.artifacts.json_cache import JsonCache
from sago_core.backends.api_failures import Failure, classify_exception, validate_response
from sago_core.backends.api_ledger import ApiLedger, BudgetExhausted
from sago_core.backends.api_served import served_identity
from sago_core.backends.protocol import Generation, Sampling, ScoringRequest, TeacherForced
from sago_core.backends.target import ModelTarget, api_identity
from sago_core.config import ApiSettings
from sago_core.errors import ConfigError

if TYPE_CHECKING:
    from sago_core.backends.factory import BackendPlaces

NO_TEACHER_FORCING = "API models return no hidden states and cannot teacher-force a given answer"
REQUEST_VERSION = "chat-v1"  # bump when the request shape changes


def import_litellm() -> Any:
    """LiteLLM, offline-safe: its price map from the package, no telemetry or banners."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_LOG", "ERROR")
    import litellm

    litellm.suppress_debug_info = True
    litellm.telemetry = False
    return litellm


def token_prices(model: str, settings: ApiSettings) -> tuple[float, float] | None:
    """USD per input and per output token: ``api.prices``, else LiteLLM's local price
    table; None when neither knows the model."""
    if settings.prices is not None:
        return settings.prices.input_per_million / 1e6, settings.prices.output_per_million / 1e6
    table = import_litellm().model_cost
    # The table names most models without their provider ("gpt-4o-mini", not "openai/...").
    entry = table.get(model) or table.get(model.partition("/")[2])
    if not isinstance(entry, dict):
        return None
    read, write = entry.get("input_cost_per_token"), entry.get("output_cost_per_token")
    return (float(read), float(write)) if read is not None and write is not None else None


@dataclass(frozen=True)
class Answer:
    text: str | None
    finish_reason: str
    failure: str | None
    served: dict[str, str] | None = None  # what the provider says answered (api_served)


# A sampled row's seed in its cache key where the provider takes none (never sent).
UNSENT_SEED = "unsent_seed"


class ApiBackend:
    name = "litellm"
    # Requests are independent (no batches, no padding), and a repeated prompt is a request
    # of its own only within one call (``request_key``'s ``repeat``): the replay of a base
    # prompt must come in the same call as its base.
    repeats_within_call = True

    def __init__(
        self,
        model: str,
        settings: ApiSettings,
        cache_dir: Path,
        ledger: ApiLedger,
        api_key: str | None = None,
    ) -> None:
        self.model = model
        self.settings = settings
        self.cache = JsonCache(cache_dir)
        self.ledger = ledger
        self._api_key = api_key  # never logged, never part of a key or an artifact
        self.calls = 0  # real requests sent by this process (tests and the manifest)
        self._litellm = import_litellm()
        if settings.spending.max_cost_usd is not None and self._price_unknown():
            raise ConfigError(
                f"api.spending.max_cost_usd is set but no price is known for {model!r}; "
                "set api.prices (USD per million input and output tokens)"
            )

    # -- identity -----------------------------------------------------------------------
    def identity(self) -> str:
        return api_identity(self.model, self.settings)

    def describe(self) -> dict[str, str]:
        version = getattr(self._litellm, "__version__", None)
        if version is None:
            import importlib.metadata

            version = importlib.metadata.version("litellm")
        return {
            "backend": self.name,
            "litellm": str(version),
            "model": self.model,
            "base_url": self.settings.base_url or "provider default",
            "logprobs": "supported" if self.supports_logprobs() else "not supported",
            "teacher_forcing": "no (Act, Prob, Ent are missing)",
        }

    def supports_logprobs(self) -> bool:
        """Asked of LiteLLM per provider, never assumed."""
        return "logprobs" in self.supported_params()

    def _price_unknown(self) -> bool:
        return token_prices(self.model, self.settings) is None

    # -- protocol -----------------------------------------------------------------------
    def encode_response(self, text: str) -> tuple[int, ...] | None:
        return None

    def prompt_lengths(self, prompts: Sequence[str]) -> list[int] | None:
        return None

    def context_window(self) -> int | None:
        return None

    def score(
        self,
        requests: Sequence[ScoringRequest],
        batch_size: int,
        max_batch_tokens: int | None = None,
    ) -> list[TeacherForced]:
        return [TeacherForced(None, None, None, 0, NO_TEACHER_FORCING) for _ in requests]

    def generate(
        self,
        prompts: Sequence[str],
        max_new_tokens: int,
        batch_size: int,
        sampling: Sampling | None = None,
    ) -> list[Generation]:
        conversations = [[{"role": "user", "content": p}] for p in prompts]
        if sampling is None:
            answers = self.complete(conversations, max_new_tokens)
            return [
                Generation(a.text or "", (), a.finish_reason, a.failure, a.served) for a in answers
            ]
        options = self.sampling_options(sampling)
        seeded = "seed" in options[0] if options else False
        # Unsent, a seed still keys its row: sample s of a text is not a cache hit of its
        # sample 0, asked in another call (the repeat count tells rows apart within a call).
        keyed = (
            None
            if seeded
            else [{**o, UNSENT_SEED: s} for o, s in zip(options, sampling.seeds, strict=True)]
        )
        answers = self.complete(conversations, max_new_tokens, options, keyed)
        records = [
            sampling.record(i, seed=sampling.seeds[i] if seeded else None, reproducible=seeded)
            for i in range(len(prompts))
        ]
        return [
            Generation(a.text or "", (), a.finish_reason, a.failure, a.served, record)
            for a, record in zip(answers, records, strict=True)
        ]

    def sampling_options(self, sampling: Sampling) -> list[dict[str, Any]]:
        """Each row's sampling parameters as this provider takes them: ``temperature``,
        ``top_p`` (when not 1) and the row's ``seed`` where LiteLLM lists it for the
        provider; ``top_k`` refused where it does not."""
        takes = self.supported_params()
        if sampling.top_k > 0 and "top_k" not in takes:
            raise ConfigError(
                f"generation.top_k: model {self.model!r} takes no top_k (through LiteLLM); "
                "set top_k 0 for API models"
            )
        shared: dict[str, Any] = {"temperature": sampling.temperature}
        if sampling.top_p < 1.0:
            shared["top_p"] = sampling.top_p
        if sampling.top_k > 0:
            shared["top_k"] = sampling.top_k
        if "seed" not in takes:
            return [dict(shared) for _ in sampling.seeds]
        return [{**shared, "seed": seed} for seed in sampling.seeds]

    def supported_params(self) -> set[str]:
        """The OpenAI-style parameters LiteLLM lists for this model's provider."""
        try:
            provider = self._litellm.get_llm_provider(self.model)[1]
            params = self._litellm.get_supported_openai_params(
                model=self.model, custom_llm_provider=provider
            )
        except Exception:
            return set()
        return set(params or ())

    # -- requests -----------------------------------------------------------------------
    def request_key(
        self,
        messages: list[dict[str, str]],
        max_tokens: int,
        repeat: int = 0,
        options: dict[str, Any] | None = None,
    ) -> str:
        """``repeat`` k > 0: the k-th repeat of the same messages in one batch (the noise
        floor's replay of the base prompt) is a request of its own, asked and cached apart.
        ``options``: a sampled request's parameters (``sampling_options``)."""
        params: dict[str, object] = {
            "temperature": 0,
            "max_tokens": max_tokens,
            "version": REQUEST_VERSION,
        }
        if options:
            params.update(options)
        if repeat:
            params["repeat"] = repeat
        payload = [self.model, self.settings.base_url, params, messages]
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()

    def complete(
        self,
        conversations: list[list[dict[str, str]]],
        max_tokens: int,
        options: list[dict[str, Any]] | None = None,
        keyed: list[dict[str, Any]] | None = None,
    ) -> list[Answer]:
        """All conversations concurrently (at most ``concurrency`` in flight). Raises
        BudgetExhausted once every started request has finished and been cached.
        ``options``: per conversation, its sampling parameters (None: greedy); ``keyed``:
        what its cache key holds instead of them (None: the same)."""
        return asyncio.run(self._complete_all(conversations, max_tokens, options, keyed))

    async def _complete_all(
        self,
        conversations: list[list[dict[str, str]]],
        max_tokens: int,
        options: list[dict[str, Any]] | None = None,
        keyed: list[dict[str, Any]] | None = None,
    ) -> list[Answer]:
        gate = asyncio.Semaphore(self.settings.concurrency)
        seen: Counter[str] = Counter()
        keys = []
        each = options or [{} for _ in conversations]
        for messages, sampled in zip(conversations, keyed or each, strict=True):
            first = self.request_key(messages, max_tokens, options=sampled)
            repeat = seen[first]
            keys.append(
                self.request_key(messages, max_tokens, repeat, sampled) if repeat else first
            )
            seen[first] += 1

        async def one(
            messages: list[dict[str, str]], key: str, sampled: dict[str, Any]
        ) -> Answer | BudgetExhausted:
            async with gate:
                try:
                    return await self._complete_one(messages, max_tokens, key, sampled)
                except BudgetExhausted as stop:
                    return stop

        results = await asyncio.gather(
            *(one(m, k, o) for m, k, o in zip(conversations, keys, each, strict=True))
        )
        for result in results:
            if isinstance(result, BudgetExhausted):
                raise result
        return [r for r in results if isinstance(r, Answer)]

    async def _complete_one(
        self,
        messages: list[dict[str, str]],
        max_tokens: int,
        key: str,
        options: dict[str, Any] | None = None,
    ) -> Answer:
        cached = self.cache.get(key)
        if isinstance(cached, dict) and cached.get("text"):
            served = cached.get("served")
            return Answer(
                cached["text"],
                cached["finish_reason"],
                None,
                served if isinstance(served, dict) else None,
            )
        failure, note = Failure("server_error"), ""
        for attempt in range(self.settings.max_retries + 1):
            self.ledger.reserve()
            outcome = await self._send(messages, max_tokens, key, options)
            if isinstance(outcome, tuple):
                text, finish, served = outcome
                entry = {"text": text, "finish_reason": finish, "model": self.model}
                self.cache.put(key, {**entry, "served": served})
                return Answer(text, finish, None, served)
            failure = outcome
            if not failure.retriable or attempt == self.settings.max_retries:
                break
            wait = self._wait(failure, attempt)
            if wait is None:
                note = f"; Retry-After {failure.retry_after:.0f}s exceeds api.max_retry_after_s"
                break
            await asyncio.sleep(wait)
        reason = f"{failure.describe()} after {attempt + 1} attempt(s){note}"
        return Answer(None, "failed", reason)

    def _wait(self, failure: Failure, attempt: int) -> float | None:
        if failure.retry_after is not None:
            if failure.retry_after > self.settings.max_retry_after_s:
                return None
            return failure.retry_after
        base = min(self.settings.max_backoff_s, self.settings.backoff_s * 2**attempt)
        return base * (0.5 + random.random() / 2)  # jitter: retries do not stampede

    async def _send(
        self,
        messages: list[dict[str, str]],
        max_tokens: int,
        key: str,
        options: dict[str, Any] | None = None,
    ) -> tuple[str, str, dict[str, str]] | Failure:
        self.calls += 1
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": 0,
            "max_tokens": max_tokens,
            "timeout": self.settings.timeout_s,
            "num_retries": 0,  # retries are ours: counted, typed, Retry-After honoured
            "max_retries": 0,
            **(options or {}),
        }
        if self.settings.base_url:
            kwargs["api_base"] = self.settings.base_url
        if self._api_key:
            kwargs["api_key"] = self._api_key
        try:
            response = await self._litellm.acompletion(**kwargs)
        except Exception as exc:  # every provider error becomes a typed failure
            self.ledger.record(key, self.model, 0, 0.0)
            return classify_exception(exc)
        tokens, cost = self._usage(response)
        self.ledger.record(key, self.model, tokens, cost)
        valid = validate_response(response, self.settings.allow_length_cutoff)
        return (*valid, served_identity(response)) if isinstance(valid, tuple) else valid

    def _usage(self, response: Any) -> tuple[int, float | None]:
        usage = getattr(response, "usage", None)
        prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion = int(getattr(usage, "completion_tokens", 0) or 0)
        prices = self.settings.prices
        if prices is not None:
            spent = prompt * prices.input_per_million + completion * prices.output_per_million
            return prompt + completion, spent / 1e6
        try:
            return prompt + completion, float(self._litellm.completion_cost(response))
        except Exception:
            return prompt + completion, None


def api_key_from_environment(settings: ApiSettings) -> str | None:
    """The key named by ``api.key_env``; None lets LiteLLM read its provider's variable."""
    if settings.key_env is None:
        return None
    value = os.environ.get(settings.key_env)
    if not value:
        raise ConfigError(f"api.key_env names {settings.key_env!r}, which is not set or empty")
    return value


def open_target(
    target: ModelTarget, places: BackendPlaces, api_key: str | None, device: str
) -> ApiBackend:
    """The ``litellm`` backend's builder (registry/backends.py): one ledger per run file."""
    from sago_core.backends.factory import get_ledger

    if target.api is None or places.cache is None or places.ledger is None:
        raise ConfigError(f"model {target.spec!r} needs the api settings, cache and ledger")
    ledger = get_ledger(places.ledger, target.api.spending)
    return ApiBackend(target.model_id, target.api, places.cache.api, ledger, api_key)
