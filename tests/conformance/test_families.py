"""Family conformance: the real HFBackend gives the model's own numbers on every family.

For each tiny random-weight family model (tests/families.py), the batched, padded,
shared-prefix scoring pass equals a plain unbatched forward of the model itself (batch 1,
no padding, ``output_hidden_states``, its own logits); greedy generation equals a plain
argmax loop; the layer count is the text config's. Set SAGO_CONFORMANCE_TABLE to a file
path to have the per-family errors written there as a Markdown table.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
import torch

from sago_core.backends.hf import HFBackend
from sago_core.backends.model_source import resolve_local_model
from sago_core.backends.protocol import ScoringRequest
from sago_core.errors import ConfigError
from tests.families import EMPTY_THINK_BLOCK, FAMILIES, PENALISING_GENERATION, build_family

pytestmark = [pytest.mark.slow, pytest.mark.conformance]

PROMPTS = [
    "Hi",
    "What is the capital of France?",
    "Name three primary colours, and explain briefly why painters call them primary.",
    "  Who wrote Hamlet ?  ",
]
MAX_NEW = 6
# Float32 on CPU: the batched pass and the plain forward differ only by summation order.
ATOL_HIDDEN = 2e-4
ATOL_LOGPROB = 2e-3
ATOL_ENTROPY = 2e-4

ERRORS: dict[str, dict[str, Any]] = {}


class FamilyDirs:
    """Model folders, each family built on first use and once per session."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.built: dict[str, Path] = {}

    def __getitem__(self, name: str) -> Path:
        if name not in self.built:
            self.built[name] = build_family(name, self.root / name)
        return self.built[name]


@pytest.fixture(scope="session")
def family_dirs(tmp_path_factory: pytest.TempPathFactory) -> FamilyDirs:
    return FamilyDirs(tmp_path_factory.mktemp("families"))


_BACKENDS: dict[tuple[str, tuple[Any, ...]], HFBackend] = {}


def load(dirs: FamilyDirs, name: str, **options: Any) -> HFBackend:
    key = (name, tuple(sorted(options.items())))
    if key not in _BACKENDS:
        _BACKENDS[key] = HFBackend(resolve_local_model(str(dirs[name])), **options)
    return _BACKENDS[key]


@pytest.fixture(scope="module", autouse=True)
def _table() -> Iterator[None]:
    yield
    _BACKENDS.clear()
    if not ERRORS:
        return
    lines = [
        "| family | architecture | layers | scoring path | max abs err Act (last / user) "
        "| Prob | Ent | greedy == argmax |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, row in ERRORS.items():
        lines.append(
            f"| {name} | {row.get('architecture', '')} | {row.get('layers', '')} "
            f"| {row.get('path', '')} | {row.get('act', float('nan')):.1e} / "
            f"{row.get('act_user', float('nan')):.1e} | {row.get('prob', float('nan')):.1e} "
            f"| {row.get('ent', float('nan')):.1e} | {row.get('greedy', '')} |"
        )
    table = "\n".join(lines)
    print("\n" + table)
    target = os.environ.get("SAGO_CONFORMANCE_TABLE")
    if target:
        Path(target).write_text(table + "\n")


def _reference(backend: HFBackend, prompt: str, response: tuple[int, ...]) -> dict[str, Any]:
    """The model's own unbatched forward: states at both read positions, logprob, entropy."""
    model = backend.model
    prompt_ids = backend.render_prompt_ids(prompt)
    ids = torch.tensor([prompt_ids + list(response)])
    with torch.inference_mode():
        out = model(input_ids=ids, output_hidden_states=True)
        final = model.get_decoder()(input_ids=ids).last_hidden_state[0]
    layers = backend.n_layers
    states = []
    for h in out.hidden_states[1:layers]:
        h = h[getattr(backend.text_config, "altup_active_idx", 0)] if h.dim() == 4 else h
        states.append(h[0])
    states.append(final)
    if out.hidden_states[layers].dim() == 3:  # the last reported state is the normed output
        torch.testing.assert_close(out.hidden_states[layers][0], final)
    n = len(prompt_ids)
    user = backend.user_text_end(prompt)
    logp = torch.log_softmax(out.logits[0].float(), dim=-1)
    rows = range(n - 1, n - 1 + len(response))
    logprob = sum(float(logp[t, tok]) for t, tok in zip(rows, response, strict=True))
    entropy = np.mean([float(-(logp[t].exp() * logp[t]).sum()) for t in rows])
    return {
        "hidden": torch.stack([s[n - 1] for s in states]).numpy(),
        "hidden_user": torch.stack([s[user] for s in states]).numpy(),
        "logprob": logprob,
        "entropy": entropy,
    }


def _argmax_loop(backend: HFBackend, prompt: str, max_new: int) -> tuple[int, ...]:
    ids = list(backend.render_prompt_ids(prompt))
    new: list[int] = []
    with torch.inference_mode():
        for _ in range(max_new):
            logits = backend.model(input_ids=torch.tensor([ids])).logits[0, -1]
            token = int(torch.argmax(logits))
            new.append(token)
            ids.append(token)
            if token in backend.stop_token_ids():
                break
    return tuple(new)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_scoring_equals_the_models_own_forward(family_dirs: FamilyDirs, family: str) -> None:
    backend = load(family_dirs, family)
    generated = backend.generate(PROMPTS, max_new_tokens=MAX_NEW, batch_size=4)
    fixed = (
        *(backend.encode_response(" It is Paris, I think.") or ()),
        backend.stop_token_ids()[0],
    )
    requests = [
        ScoringRequest(p, g.response_token_ids) for p, g in zip(PROMPTS, generated, strict=True)
    ]
    requests += [ScoringRequest(p, fixed) for p in PROMPTS]
    requests.append(ScoringRequest(PROMPTS[1], ()))  # no response: states only
    errors = {"act": 0.0, "act_user": 0.0, "prob": 0.0, "ent": 0.0}
    refs = [_reference(backend, r.prompt, r.response_token_ids) for r in requests]
    # one wide batch (shared prefix, right padding, mixed lengths), small token budgets, alone
    runs = [
        backend.score(requests, batch_size=16),
        backend.score(requests, batch_size=3, max_batch_tokens=90),
        # one request alone: its whole prompt up to the user's text is a shared prefix
        [backend.score([r], batch_size=1)[0] for r in requests],
    ]
    for scored in runs:
        for request, result, ref in zip(requests, scored, refs, strict=True):
            assert result.hidden is not None and result.hidden_user is not None
            assert result.hidden.shape == (backend.n_layers, ref["hidden"].shape[1])
            errors["act"] = max(errors["act"], float(np.abs(result.hidden - ref["hidden"]).max()))
            errors["act_user"] = max(
                errors["act_user"], float(np.abs(result.hidden_user - ref["hidden_user"]).max())
            )
            if not request.response_token_ids:
                assert result.n_response_tokens == 0
                continue
            assert result.logprob is not None and result.mean_entropy is not None
            errors["prob"] = max(errors["prob"], abs(result.logprob - ref["logprob"]))
            errors["ent"] = max(errors["ent"], abs(result.mean_entropy - ref["entropy"]))
    description = backend.describe()
    ERRORS.setdefault(family, {}).update(
        errors,
        architecture=description["architecture"],
        layers=description["layers"],
        path=description["scoring_path"].split(" (")[0],
    )
    print(f"{family}: {description['scoring_path']}; max errors {errors}")
    assert errors["act"] <= ATOL_HIDDEN and errors["act_user"] <= ATOL_HIDDEN
    assert errors["prob"] <= ATOL_LOGPROB and errors["ent"] <= ATOL_ENTROPY


@pytest.mark.parametrize("family", list(FAMILIES))
def test_layers_and_read_positions(family_dirs: FamilyDirs, family: str) -> None:
    backend = load(family_dirs, family)
    layers = backend.model.config.get_text_config(decoder=True).num_hidden_layers
    assert backend.n_layers == layers
    assert backend.describe()["layers"] == str(layers)
    for prompt in PROMPTS:
        ids = backend.render_prompt_ids(prompt)
        user = backend.user_text_end(prompt)
        if backend.tokenizer.chat_template is None:
            assert user == len(ids) - 1
            continue
        # the user's last token completes the user's text; the one before it does not
        rendered = backend.render_prompt(prompt) or ""
        needle = prompt if prompt in rendered else prompt.strip()
        assert needle in backend.tokenizer.decode(ids[: user + 1])
        assert needle not in backend.tokenizer.decode(ids[:user])
        assert user < len(ids) - 1  # the assistant header comes after it


@pytest.mark.parametrize("family", list(FAMILIES))
def test_stages_give_one_cosine_per_layer(family_dirs: FamilyDirs, family: str) -> None:
    from sago_core.config import AnalysisSettings, GenerationSettings, VariantGrid
    from sago_core.stages.analysis import analyse_pairs
    from sago_core.stages.generation import generate_responses
    from sago_core.stages.variants import build_variant_candidates

    backend = load(family_dirs, family)
    prompts = pl.DataFrame(
        {
            "dataset": ["d", "d"],
            "prompt_id": ["p1", "p2"],
            "prompt": [PROMPTS[1], PROMPTS[2]],
            "references": [["Paris"], ["red"]],
            "source": ["builtin", "builtin"],
        }
    )
    grid = VariantGrid.model_validate({"register": {"strengths": [2]}, "noise": None})
    candidates = build_variant_candidates(prompts, grid, seed=0)
    variants = (
        candidates.join(prompts.select("prompt_id", "prompt"), on="prompt_id")
        .with_columns(pl.col("prompt").alias("text"))
        .drop("prompt")
    )
    generations = generate_responses(
        backend, f"hf:{family}", prompts, variants, GenerationSettings(max_new_tokens=4)
    )
    analysis = analyse_pairs(backend, generations, AnalysisSettings(batch_size=8))
    counts = {len(c) for c in analysis["layer_cosines"].to_list() if c is not None}
    assert counts == {backend.n_layers}
    # the same text as its base prompt: every cosine is 1 (within float error)
    assert float(analysis["act_cos_mean"].min()) == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_greedy_generation_is_a_plain_argmax_loop(family_dirs: FamilyDirs, family: str) -> None:
    backend = load(family_dirs, family)
    batched = backend.generate(PROMPTS, max_new_tokens=MAX_NEW, batch_size=4)  # left padded
    loops = [_argmax_loop(backend, p, MAX_NEW) for p in PROMPTS]
    same = [g.response_token_ids == loop for g, loop in zip(batched, loops, strict=True)]
    ERRORS.setdefault(family, {})["greedy"] = f"{sum(same)}/{len(same)}"
    assert all(same), [(g.response_token_ids, loop) for g, loop in zip(batched, loops, strict=True)]


def test_checkpoint_generation_config_does_not_change_greedy(
    family_dirs: FamilyDirs,
) -> None:
    greedy = load(family_dirs, "llama-penalised")
    defaults = load(family_dirs, "llama-penalised", use_model_defaults=True)
    prompts = [*PROMPTS, "Say the word 'cat' five times: cat cat cat"]
    ours = greedy.generate(prompts, max_new_tokens=10, batch_size=4)
    loops = [_argmax_loop(greedy, p, 10) for p in prompts]
    assert [g.response_token_ids for g in ours] == loops
    theirs = defaults.generate(prompts, max_new_tokens=10, batch_size=4)
    differing = sum(
        a.response_token_ids != b.response_token_ids for a, b in zip(ours, theirs, strict=True)
    )
    print(f"checkpoint defaults change {differing} of {len(prompts)} greedy answers")
    assert differing > 0  # the checkpoint's penalties matter, and sago's T=0 ignores them
    import json

    used = json.loads(greedy.describe()["decoding"])
    assert used["repetition_penalty"] == 1.0 and used["no_repeat_ngram_size"] == 0
    assert used["do_sample"] is False
    theirs_used = json.loads(defaults.describe()["decoding"])
    assert theirs_used["repetition_penalty"] == PENALISING_GENERATION["repetition_penalty"]
    assert theirs_used["source"] == "checkpoint generation_config"


def test_thinking_template(family_dirs: FamilyDirs) -> None:
    folder = family_dirs["qwen3-thinking"]
    default = load(family_dirs, "qwen3-thinking")
    assert default.chat_template_kwargs == {"enable_thinking": False}
    assert (default.render_prompt(PROMPTS[1]) or "").endswith(EMPTY_THINK_BLOCK)
    thinking = load(
        family_dirs, "qwen3-thinking", chat_template_kwargs=(("enable_thinking", True),)
    )
    rendered = thinking.render_prompt(PROMPTS[1]) or ""
    assert "<think>" not in rendered and rendered.endswith("assistant\n")
    assert '"enable_thinking": true' in thinking.describe()["chat_template_kwargs"]
    with pytest.raises(ConfigError, match=rf"(?s){folder.name}.*'enable_thinkng'"):
        HFBackend(
            resolve_local_model(str(folder)), chat_template_kwargs=(("enable_thinkng", False),)
        )
    # a template that does not offer thinking gets no kwargs by default
    assert load(family_dirs, "llama").chat_template_kwargs == {}
