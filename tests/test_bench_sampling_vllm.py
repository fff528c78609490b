"""The vLLM prefix-cache bench's pure parts (no engine): its table from hand-made timings,
the identical-answer count, the few-shot texts, and the one-line skip without vLLM."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.sampling_vllm import fewshot_texts, identical, table, vllm_sampling_costs


def result(cached: int | None) -> dict:
    arm = {"requests": 48, "prompt_tokens": 28800, "load_seconds": 20.0}
    return {
        "model": "vllm:m",
        "device": "cpu",
        "texts": 6,
        "samples": 8,
        "temperature": 0.7,
        "max_new_tokens": 32,
        "prompt_lengths": [590, 610],
        "load_average": [1.5, 2.0],
        "engine_options": {"enable_chunked_prefill": False},
        "arms": [
            {
                **arm,
                "prefix_caching": True,
                "seconds": 12.0,
                "generated_tokens": 1200,
                "cached_prompt_tokens": cached,
            },
            {
                **arm,
                "prefix_caching": False,
                "seconds": 30.0,
                "generated_tokens": 1500,
                "cached_prompt_tokens": 0,
            },
        ],
        "identical": 45,
    }


def test_table_gives_per_sample_cost_rates_tokens_and_the_speed_up() -> None:
    lines = table(result(cached=21504))
    off = next(line for line in lines if line.startswith("off")).split()
    on = next(line for line in lines if line.startswith("on")).split()
    # 30 s / 48 samples = 625 ms, 1500 tokens / 30 s = 50.0 tok/s, nothing from the cache
    assert off[1:] == ["30.0", "625", "50.0", "28800", "28800", "0"]
    # 12 s / 48 = 250 ms, 1200 / 12 = 100.0 tok/s, 28800 - 21504 = 7296 computed
    assert on[1:] == ["12.0", "250", "100.0", "28800", "7296", "21504"]
    text = "\n".join(lines)
    assert "(wall off / on): 2.50x" in text
    assert "45/48 (93.8%)" in text
    assert "590-610 prompt tokens" in text and "load average 1.5 -> 2.0" in text
    assert "{'enable_chunked_prefill': False}" in text


def test_an_unreported_cache_count_is_na_not_zero() -> None:
    on = next(line for line in table(result(cached=None)) if line.startswith("on")).split()
    assert on[-2:] == ["NA", "NA"]


def test_identical_counts_equal_answers_in_order() -> None:
    assert identical([(1, 2), (3,), ()], [(1, 2), (4,), ()]) == 2
    with pytest.raises(ValueError):
        identical([(1,)], [])


def test_fewshot_texts_differ_from_their_first_token() -> None:
    texts = fewshot_texts(6)
    assert len({t.split("\n", 1)[0] for t in texts}) == 6
    assert all(t.endswith("\nAnswer:") and t.count("Question:") > 20 for t in texts)


def test_no_vllm_environment_is_one_skip_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SAGO_VLLM_PYTHON", str(tmp_path / "missing" / "python"))
    lines = vllm_sampling_costs(tmp_path)
    assert len(lines) == 1 and lines[0].startswith("vLLM prefix-cache speed-up skipped: ")
    assert "make setup-vllm" in lines[0]
