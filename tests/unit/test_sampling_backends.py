"""Backends sampling at T > 0, one sample per prompt text: the
transformers backend samples each row with its own seeded generator (a row's answer does
not change with its batch), the mock backend varies its answers by seed, the API backend
sends temperature, top_p and the row's seed (and keys its cache on them), and the
generation stage gives each row its derived seed and records the sampling applied in the
row's ``engine`` JSON. Greedy calls are untouched: the existing backend tests cover them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from sago_core.backends.protocol import Sampling
from sago_core.config import ApiSettings, ApiSpending, GenerationSettings
from sago_core.errors import ConfigError
from sago_core.sample_seeds import sample_seed
from tests.fakes import PROMPTS, kept_variants


def _sampling(seeds: list[int], temperature: float = 1.0, **filters: Any) -> Sampling:
    return Sampling(temperature, filters.get("top_p", 1.0), filters.get("top_k", 0), tuple(seeds))


# ------------------------------------------------------------------ the row sampler


def test_the_row_sampler_follows_the_distribution_and_its_filters() -> None:
    import torch

    from sago_core.backends.hf_sampling import sample_rows

    rows = 3000
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.2]])).repeat(rows, 1)

    def drawn(sampling: Sampling) -> torch.Tensor:
        generators = [torch.Generator().manual_seed(s) for s in sampling.seeds]
        return torch.bincount(sample_rows(logits, sampling, generators), minlength=3) / rows

    seeds = list(range(rows))
    # 3000 draws: a share's standard error is <= 0.0092; 0.04 is over four of them.
    assert torch.allclose(drawn(_sampling(seeds)), torch.tensor([0.5, 0.3, 0.2]), atol=0.04)
    # top_p 0.6 keeps the two likeliest tokens (0.5 < 0.6 <= 0.8), renormalised: 5/8, 3/8.
    nucleus = drawn(_sampling(seeds, top_p=0.6))
    assert nucleus[2] == 0 and abs(float(nucleus[0]) - 0.625) < 0.04
    assert torch.equal(drawn(_sampling(seeds, top_k=1)), torch.tensor([1.0, 0.0, 0.0]))
    # a low temperature sharpens towards the likeliest token
    assert drawn(_sampling(seeds, temperature=0.2))[0] > 0.85
    # one row's draw depends on its own generator only
    one = sample_rows(logits[:1], _sampling([17]), [torch.Generator().manual_seed(17)])
    assert int(one[0]) == int(
        sample_rows(
            logits[:5],
            _sampling([1, 2, 17, 4, 5]),
            [torch.Generator().manual_seed(s) for s in (1, 2, 17, 4, 5)],
        )[2]
    )


# ------------------------------------------------------------------ transformers


def test_a_sampled_hf_row_does_not_change_with_its_batch(tiny_model_dir: Path) -> None:
    from sago_core.backends.hf import HFBackend
    from sago_core.backends.model_source import resolve_local_model

    backend = HFBackend(resolve_local_model(str(tiny_model_dir)))
    target = "What is the capital of France?"
    others = ["Hi", "Name three rivers that cross more than two countries in Europe, please."]
    alone = backend.generate([target], 12, 1, _sampling([1234]))[0]
    batched = backend.generate([others[0], target, others[1]], 12, 3, _sampling([5, 1234, 6]))
    assert batched[1].response_token_ids == alone.response_token_ids
    assert batched[1].response_text == alone.response_text
    assert alone.sampling is not None and alone.sampling["seed"] == 1234
    assert alone.sampling["temperature"] == 1.0 and alone.sampling["reproducible"] is True
    # the seed decides: another seed, another answer (random weights at T = 1 spread their
    # probability over the whole vocabulary); a greedy call records no sampling
    other = backend.generate([target], 12, 1, _sampling([99]))[0]
    assert other.response_token_ids != alone.response_token_ids
    greedy = backend.generate([target], 12, 1)[0]
    assert greedy.sampling is None


# ------------------------------------------------------------------ mock


def test_the_mock_backend_varies_by_seed_and_only_by_seed() -> None:
    from sago_core.backends.mock import MockBackend, mock_answer

    backend = MockBackend("m")
    prompt = "What is the capital of France today?"
    seeds = list(range(8))
    first = [g.response_text for g in backend.generate([prompt] * 8, 40, 8, _sampling(seeds))]
    again = [backend.generate([prompt], 40, 1, _sampling([s]))[0].response_text for s in seeds]
    assert first == again
    assert len(set(first)) > 2 and mock_answer(prompt) in first
    assert backend.generate([prompt], 40, 1)[0].response_text == mock_answer(prompt)


# ------------------------------------------------------------------ the generation stage


def _variants() -> pl.DataFrame:
    rows = [
        ("p1", "replay", "replay", "What is the capital of France?"),
        ("p1", "noise-1", "noise", "What is  the capital of France?"),
    ]
    return kept_variants(rows)


def test_the_generation_stage_seeds_each_row_and_records_its_sampling() -> None:
    from sago_core.backends.mock import MockBackend
    from sago_core.stages.generation import generate_responses

    hot = GenerationSettings(max_new_tokens=40, temperature=0.8, top_p=0.9, seed=7)
    frame = generate_responses(MockBackend("m"), "mock:m", PROMPTS, _variants(), hot)
    records = [json.loads(e) for e in frame["engine"].to_list()]
    keys = frame.select("dataset", "prompt_id", "variant_id").iter_rows()
    expected = [sample_seed(7, "mock:m", d, p, v, 0) for d, p, v in keys]
    assert [r["sampling"]["seed"] for r in records] == expected
    assert len(set(expected)) == len(expected)  # the replay is a sample of its own
    assert {(r["sampling"]["temperature"], r["sampling"]["top_p"]) for r in records} == {(0.8, 0.9)}
    again = generate_responses(MockBackend("m"), "mock:m", PROMPTS, _variants(), hot)
    assert again.equals(frame)
    greedy = generate_responses(
        MockBackend("m"), "mock:m", PROMPTS, _variants(), GenerationSettings(max_new_tokens=40)
    )
    assert all("sampling" not in json.loads(e) for e in greedy["engine"].to_list())


# ------------------------------------------------------------------ API (LiteLLM)


class _Spy:
    """LiteLLM as it is, with each ``acompletion``'s arguments kept."""

    def __init__(self, litellm: Any) -> None:
        self._litellm = litellm
        self.sent: list[dict[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._litellm, name)

    async def acompletion(self, **kwargs: Any) -> Any:
        self.sent.append(kwargs)
        return await self._litellm.acompletion(**kwargs)


def _api(tmp: Path, model: str, base_url: str | None = None) -> Any:
    from sago_core.backends.api import ApiBackend
    from sago_core.backends.api_ledger import ApiLedger

    settings = ApiSettings.model_validate({"base_url": base_url, "max_retries": 0})
    ledger = ApiLedger(tmp / "ledger.jsonl", ApiSpending())
    return ApiBackend(model, settings, tmp / "cache", ledger, api_key="sk-local-test")


def test_the_api_backend_sends_and_keys_the_sampling_and_says_when_no_seed_is_taken(
    tmp_path: Path,
) -> None:
    from tests.openai_server import ScriptedServer

    prompts = ["What is 2 plus 2?", "Name a river."]
    with ScriptedServer() as server:
        backend = _api(tmp_path, "openai/mock-1", server.base_url)
        spy = backend._litellm = _Spy(backend._litellm)
        answers = backend.generate(prompts, 20, 2, _sampling([11, 12], 0.7, top_p=0.9))
        assert [(s["temperature"], s["top_p"], s["seed"]) for s in spy.sent] == [
            (0.7, 0.9, 11),
            (0.7, 0.9, 12),
        ]
        assert [a.sampling["seed"] for a in answers if a.sampling] == [11, 12]
        assert all(a.sampling and a.sampling["reproducible"] for a in answers)
        # same seeds: answered from the cache; greedy or another seed: a request of its own
        backend.generate(prompts, 20, 2, _sampling([11, 12], 0.7, top_p=0.9))
        assert server.total_calls() == 2
        backend.generate(prompts[:1], 20, 1)
        backend.generate(prompts[:1], 20, 1, _sampling([13], 0.7, top_p=0.9))
        assert server.total_calls() == 4
        assert spy.sent[2]["temperature"] == 0 and "seed" not in spy.sent[2]
        with pytest.raises(ConfigError, match=r"generation\.top_k: .* takes no top_k"):
            backend.generate(prompts, 20, 2, _sampling([1, 2], 0.7, top_k=5))
    # A provider LiteLLM lists no seed for gets none.
    anthropic = _api(tmp_path, "anthropic/claude-3-5-haiku-20241022")
    options = anthropic.sampling_options(_sampling([1, 2], 0.7))
    assert options == [{"temperature": 0.7}, {"temperature": 0.7}]
