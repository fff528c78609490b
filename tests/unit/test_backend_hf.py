"""transformers backend on a tiny random-weight model: padding, log-probs, entropy, ids."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from sago_core.backends.hf import HFBackend
from sago_core.backends.model_source import resolve_local_model
from sago_core.backends.protocol import ScoringRequest
from sago_core.backends.tensor_ops import last_prompt_index, response_logprob_and_entropy
from sago_core.errors import ModelNotFoundError

PROMPTS = [
    "What is the capital of France?",
    "Hi",
    "Name three primary colours, and explain briefly why they are called primary.",
    "Who wrote Hamlet?",
]


@pytest.fixture(scope="module")
def backend(tiny_model_dir: Path) -> HFBackend:
    return HFBackend(resolve_local_model(str(tiny_model_dir)))


def test_last_prompt_index_under_left_and_right_padding() -> None:
    right = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]])
    left = torch.tensor([[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]])
    prompt_lengths = torch.tensor([3, 5])
    assert last_prompt_index(right, prompt_lengths, "right").tolist() == [2, 4]
    assert last_prompt_index(left, prompt_lengths, "left").tolist() == [4, 4]


def test_logprob_and_entropy_helper_golden() -> None:
    logits = torch.tensor([[0.0, 0.0], [2.0, 0.0]])
    target = torch.tensor([1, 0])
    logprob, entropy = response_logprob_and_entropy(logits, target)
    p = 1 / (1 + np.exp(-2.0))
    assert logprob == pytest.approx(np.log(0.5) + np.log(p))
    h2 = -(p * np.log(p) + (1 - p) * np.log(1 - p))
    assert entropy == pytest.approx((np.log(2) + h2) / 2)


@pytest.mark.slow
def test_batched_scoring_equals_one_by_one(backend: HFBackend) -> None:
    responses = backend.generate(PROMPTS, max_new_tokens=6, batch_size=4)
    requests = [
        ScoringRequest(p, g.response_token_ids) for p, g in zip(PROMPTS, responses, strict=False)
    ]
    batched = backend.score(requests, batch_size=4)
    single = [backend.score([r], batch_size=1)[0] for r in requests]
    for a, b in zip(batched, single, strict=True):
        assert a.hidden is not None and b.hidden is not None
        assert a.hidden.shape == (3, 64)
        np.testing.assert_allclose(a.hidden, b.hidden, atol=1e-4)
        assert a.logprob == pytest.approx(b.logprob, abs=1e-3)
        assert a.mean_entropy == pytest.approx(b.mean_entropy, abs=1e-4)


@pytest.mark.slow
def test_batched_generation_equals_one_by_one(backend: HFBackend) -> None:
    batched = backend.generate(PROMPTS, max_new_tokens=6, batch_size=4)
    single = [backend.generate([p], max_new_tokens=6, batch_size=1)[0] for p in PROMPTS]
    assert [g.response_token_ids for g in batched] == [g.response_token_ids for g in single]
    assert all(len(g.response_token_ids) <= 6 for g in batched)


@pytest.mark.slow
def test_teacher_forced_logprob_is_sum_of_per_token_log_softmax(backend: HFBackend) -> None:
    prompt = PROMPTS[0]
    response = (42, 7, 1000, 5)
    result = backend.score([ScoringRequest(prompt, response)], batch_size=1)[0]
    prompt_ids = backend.render_prompt_ids(prompt)
    ids = torch.tensor([prompt_ids + list(response)])
    with torch.inference_mode():
        logits = backend.model(input_ids=ids).logits[0].float()
    logp = torch.log_softmax(logits, dim=-1)
    n = len(prompt_ids)
    expected = sum(float(logp[n - 1 + t, tok]) for t, tok in enumerate(response))
    assert result.logprob == pytest.approx(expected, abs=1e-4)
    entropies = [float(-(logp[n - 1 + t].exp() * logp[n - 1 + t]).sum()) for t in range(4)]
    assert result.mean_entropy == pytest.approx(np.mean(entropies), abs=1e-5)
    # the hidden state is the final layer's at the last prompt token
    with torch.inference_mode():
        states = backend.model(input_ids=ids, output_hidden_states=True).hidden_states
    assert result.hidden is not None
    np.testing.assert_allclose(result.hidden[-1], states[-1][0, n - 1].numpy(), atol=1e-5)
    np.testing.assert_allclose(result.hidden[0], states[1][0, n - 1].numpy(), atol=1e-5)


@pytest.mark.slow
def test_generation_stops_at_eos_and_keeps_it(backend: HFBackend) -> None:
    eos = min(backend.stop_token_ids())
    assert backend._cut([5, 6, eos, eos, eos]) == ((5, 6, eos), "stop")
    assert backend._cut([5, 6, 7]) == ((5, 6, 7), "length")


def test_model_resolution_errors(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        resolve_local_model(str(tmp_path / "missing-model"))
    with pytest.raises(ModelNotFoundError, match=r"config\.json"):
        resolve_local_model(str(tmp_path))
    embedded = resolve_local_model("smollm2-135m")
    assert embedded.kind == "gguf" and embedded.identity.startswith("sha256:")
    hub = resolve_local_model("HuggingFaceTB/SmolLM2-135M-Instruct")
    assert hub.kind == "hub" and hub.identity.startswith("hub:HuggingFaceTB/")


def test_batches_respect_row_and_token_budgets() -> None:
    from sago_core.backends.hf import _length_sorted_batches

    lengths = [10, 200, 12, 11, 180, 13, 400]
    batches = list(_length_sorted_batches(lengths, batch_size=3, max_tokens=400))
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for batch in batches:
        assert len(batch) <= 3
        assert len(batch) * max(lengths[i] for i in batch) <= 400 or len(batch) == 1
    assert [lengths[i] for i in batches[0]] == [10, 11, 12]
    assert list(_length_sorted_batches([5, 5], batch_size=8)) == [[0, 1]]


@pytest.mark.slow
def test_token_budget_does_not_change_results(backend: HFBackend) -> None:
    responses = backend.generate(PROMPTS, max_new_tokens=6, batch_size=4)
    requests = [
        ScoringRequest(p, g.response_token_ids) for p, g in zip(PROMPTS, responses, strict=True)
    ]
    wide = backend.score(requests, batch_size=4)
    narrow = backend.score(requests, batch_size=4, max_batch_tokens=64)
    for a, b in zip(wide, narrow, strict=True):
        assert a.hidden is not None and b.hidden is not None
        np.testing.assert_allclose(a.hidden, b.hidden, atol=1e-4)
        assert a.logprob == pytest.approx(b.logprob, abs=1e-3)


@pytest.mark.slow
def test_shared_prefix_is_used_and_changes_nothing(
    backend: HFBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sago_core.backends.hf as hf

    responses = backend.generate(PROMPTS, max_new_tokens=5, batch_size=4)
    requests = [
        ScoringRequest(p, g.response_token_ids) for p, g in zip(PROMPTS, responses, strict=True)
    ]
    rows = [backend.render_prompt_ids(r.prompt) + list(r.response_token_ids) for r in requests]
    prefix = backend._shared_prefix(rows, [len(backend.render_prompt_ids(p)) for p in PROMPTS])
    assert prefix is not None and prefix.get_seq_length() >= hf.MIN_SHARED_PREFIX
    shared = backend.score(requests, batch_size=4)
    monkeypatch.setattr(hf, "MIN_SHARED_PREFIX", 10**6)
    plain = backend.score(requests, batch_size=4)
    for a, b in zip(shared, plain, strict=True):
        assert a.hidden is not None and b.hidden is not None
        np.testing.assert_allclose(a.hidden, b.hidden, atol=1e-4)
        assert a.logprob == pytest.approx(b.logprob, abs=1e-3)
        assert a.mean_entropy == pytest.approx(b.mean_entropy, abs=1e-4)


def test_entropy_ignores_zero_probability_tokens_and_keeps_non_finite() -> None:
    logits = torch.tensor([[0.0, 0.0, float("-inf")]])
    logprob, entropy = response_logprob_and_entropy(logits, torch.tensor([0]))
    assert logprob == pytest.approx(np.log(0.5))
    assert entropy == pytest.approx(np.log(2))  # 0 log 0 = 0, not NaN
    # a target of probability 0: -inf comes back as it is (the stage records it missing)
    logprob, entropy = response_logprob_and_entropy(logits, torch.tensor([2]))
    assert logprob == float("-inf") and np.isfinite(entropy)
    logprob, entropy = response_logprob_and_entropy(
        torch.tensor([[float("nan"), 0.0]]), torch.tensor([1])
    )
    assert np.isnan(logprob) and np.isnan(entropy)


def test_placement_over_several_gpus() -> None:
    from sago_core.backends.hf_loading import placement_kwargs
    from sago_core.errors import ConfigError

    assert placement_kwargs("cpu", 1, []) == {}
    assert placement_kwargs("cuda", 1, [80 * 2**30]) == {}
    two = placement_kwargs("cuda", 2, [80 * 2**30, 80 * 2**30, 40 * 2**30])
    assert two == {"device_map": "auto", "max_memory": {0: "73728MiB", 1: "73728MiB"}}
    with pytest.raises(ConfigError, match="no visible GPU"):
        placement_kwargs("cpu", 2, [])
    with pytest.raises(ConfigError, match="no visible GPU"):
        placement_kwargs("cuda", 2, [])
    with pytest.raises(ConfigError, match=r"more GPUs than are visible \(1\)"):
        placement_kwargs("cuda", 2, [80 * 2**30])
    with pytest.raises(ConfigError, match="at least 1"):
        placement_kwargs("cuda", 0, [80 * 2**30])


@pytest.mark.slow
def test_several_devices_on_a_cpu_machine_is_a_config_error(tiny_model_dir: Path) -> None:
    from sago_core.errors import ConfigError

    with pytest.raises(ConfigError, match="devices=2"):
        HFBackend(resolve_local_model(str(tiny_model_dir)), device="cpu", devices=2)


THINKING = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n"
    "{% endif %}{% endif %}"
)


def test_chat_template_kwargs_resolution() -> None:
    from sago_core.backends.hf_loading import resolve_chat_template_kwargs, template_variables
    from sago_core.errors import ConfigError

    assert "enable_thinking" in template_variables(THINKING)
    assert "enable_thinking" in template_variables({"default": THINKING, "tool_use": "x"})
    assert template_variables(None) == set()
    assert resolve_chat_template_kwargs(THINKING, None, "m") == {"enable_thinking": False}
    assert resolve_chat_template_kwargs("{{ messages }}", None, "m") == {}
    assert resolve_chat_template_kwargs(None, None, "m") == {}
    chosen = resolve_chat_template_kwargs(THINKING, (("enable_thinking", True),), "m")
    assert chosen == {"enable_thinking": True}
    with pytest.raises(ConfigError, match=r"model /models/q.*'thinking'"):
        resolve_chat_template_kwargs(THINKING, (("thinking", True),), "/models/q")
    with pytest.raises(ConfigError, match="no chat template"):
        resolve_chat_template_kwargs(None, (("enable_thinking", True),), "m")


@pytest.mark.slow
def test_a_chat_template_that_fails_to_render_is_a_config_error(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    import shutil

    from sago_core.errors import ConfigError

    folder = tmp_path / "broken-template"
    shutil.copytree(tiny_model_dir, folder)
    for name in ("chat_template.json", "chat_template.jinja"):
        (folder / name).unlink(missing_ok=True)
    (folder / "chat_template.jinja").write_text("{{ raise_exception('no user turns here') }}")
    with pytest.raises(ConfigError, match=r"broken-template.*failed to render"):
        HFBackend(resolve_local_model(str(folder)))


@pytest.mark.slow
def test_a_model_whose_forward_fails_is_a_load_error(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from transformers import LlamaForCausalLM

    from sago_core.errors import ModelLoadError

    def broken(self: object, *args: object, **kwargs: object) -> None:
        raise RuntimeError("this architecture cannot run here")

    monkeypatch.setattr(LlamaForCausalLM, "forward", broken)
    with pytest.raises(ModelLoadError, match=rf"{tiny_model_dir.name}.*forward pass failed"):
        HFBackend(resolve_local_model(str(tiny_model_dir)))


@pytest.mark.slow
def test_public_prompt_ids_stop_ids_and_description(backend: HFBackend) -> None:
    import json

    ids = backend.render_prompt_ids(PROMPTS[0])
    assert backend.tokenizer.eos_token_id in backend.stop_token_ids()
    user = backend.user_text_end(PROMPTS[0])
    assert PROMPTS[0] in backend.tokenizer.decode(ids[: user + 1])
    assert PROMPTS[0] not in backend.tokenizer.decode(ids[:user])
    description = backend.describe()
    decoding = json.loads(description["decoding"])
    assert decoding["do_sample"] is False and decoding["repetition_penalty"] == 1.0
    assert description["layers"] == "3"
    assert json.loads(description["chat_template_kwargs"]) == {}
    assert description["scoring_path"].startswith("fast")
    result = backend.score([ScoringRequest(PROMPTS[0], (42, 7))], batch_size=1)[0]
    assert result.hidden is not None and result.hidden_user is not None
    assert result.hidden_user.shape == result.hidden.shape == (3, 64)
    assert not np.allclose(result.hidden_user, result.hidden)


def test_an_unknown_logit_scaling_falls_back_to_the_models_own_forward(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An architecture whose forward scales its logits in a way sago does not know: the
    load-time self-check sees the fast path disagree and scores through the model's own
    forward, which then gives the model's own numbers."""
    from transformers import LlamaForCausalLM

    original = LlamaForCausalLM.forward

    def halved(self: LlamaForCausalLM, *args: object, **kwargs: object) -> object:
        out = original(self, *args, **kwargs)  # type: ignore[arg-type]
        out.logits = out.logits * 0.5
        return out

    monkeypatch.setattr(LlamaForCausalLM, "forward", halved)
    backend = HFBackend(resolve_local_model(str(tiny_model_dir)))
    assert backend.describe()["scoring_path"].startswith("slow")
    response = (42, 7, 1000, 5)
    results = backend.score(
        [ScoringRequest(PROMPTS[0], response), ScoringRequest(PROMPTS[2], response)], 2
    )
    prompt_ids = backend.render_prompt_ids(PROMPTS[0])
    ids = torch.tensor([prompt_ids + list(response)])
    with torch.inference_mode():
        out = backend.model(input_ids=ids, output_hidden_states=True)
    logp = torch.log_softmax(out.logits[0].float(), dim=-1)
    n = len(prompt_ids)
    expected = sum(float(logp[n - 1 + t, tok]) for t, tok in enumerate(response))
    assert results[0].logprob == pytest.approx(expected, abs=1e-4)
    assert results[0].hidden is not None
    np.testing.assert_allclose(results[0].hidden[0], out.hidden_states[1][0, n - 1], atol=1e-5)
    np.testing.assert_allclose(results[0].hidden[-1], out.hidden_states[-1][0, n - 1], atol=1e-5)


def test_a_row_past_the_models_context_is_missing_with_its_reason(backend: HFBackend) -> None:
    """A variant too long to answer is still forced with its base's answer (analysis.py):
    past the model's 1,024 positions that row is missing with its reason, the others are
    scored as alone."""
    short = ScoringRequest("Who wrote Hamlet?", (5, 6, 7))
    long = ScoringRequest("word " * 1100, (5, 6, 7))
    short_alone = backend.score([short], batch_size=2)[0]
    scored = backend.score([long, short], batch_size=2)
    assert scored[0].hidden is None and scored[0].logprob is None
    assert scored[0].missing_reason is not None
    assert "past the model's context of 1024 tokens" in scored[0].missing_reason
    assert scored[1].hidden is not None and short_alone.hidden is not None
    np.testing.assert_allclose(scored[1].hidden, short_alone.hidden, atol=1e-5)
    assert scored[1].logprob == pytest.approx(short_alone.logprob, abs=1e-5)
