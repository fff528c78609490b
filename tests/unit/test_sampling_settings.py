"""Sampling settings at the edge: ``generation.temperature, top_p,
top_k, samples, seed``. A greedy configuration serialises exactly as before they existed
(same result hash, same generate-stage fingerprint), bad values are refused at parse in one
line naming the key, each sample's seed is a stable digest, and the dry-run plan states
the decoding and counts K answers per text."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sago_core.config import GenerationSettings, RunConfig, VariantGrid, build_config
from sago_core.errors import ConfigError
from sago_core.sample_seeds import SEED_BITS, sample_seed
from tests.fakes import PROMPTS
from tests.grids import noise_only

GREEDY_KEYS = ["max_new_tokens", "batch_size", "use_model_defaults", "chat_template_kwargs"]


def test_a_greedy_configuration_serialises_as_before_the_sampling_keys() -> None:
    plain = GenerationSettings()
    assert list(plain.model_dump()) == GREEDY_KEYS
    assert plain.model_dump_json() == (
        '{"max_new_tokens":100,"batch_size":16,"use_model_defaults":false,'
        '"chat_template_kwargs":null}'
    )
    # At T = 0, top_p, top_k and seed change nothing, so they change no key either.
    idle = GenerationSettings(top_p=0.5, top_k=4, seed=9)
    assert idle.model_dump_json() == plain.model_dump_json()
    demo = build_config("demo")
    assert build_config("demo", {"generation": {"top_p": 0.5, "seed": 9}}).result_hash() == (
        demo.result_hash()
    )
    sampled = build_config("demo", {"generation": {"temperature": 0.7}})
    assert sampled.result_hash() != demo.result_hash()
    assert sampled.resolved_run_id() != demo.resolved_run_id()
    assert build_config("demo", {"generation": {"temperature": 0.7, "seed": 1}}).result_hash() != (
        sampled.result_hash()
    )
    # The written configuration reads back as the same settings.
    assert RunConfig.model_validate(sampled.model_dump(by_alias=True)) == sampled
    assert sampled.generation.model_dump()["temperature"] == 0.7


def test_the_generate_stage_key_sees_the_sampling_settings_only_when_sampling() -> None:
    from sago.tasks.caching import _fingerprint

    plain = GenerationSettings(max_new_tokens=40, batch_size=64)
    assert json.loads(_fingerprint("settings", plain)) == {
        "max_new_tokens": 40,
        "batch_size": 64,
        "use_model_defaults": False,
        "chat_template_kwargs": None,
    }
    hot = plain.model_copy(update={"temperature": 0.7, "top_p": 0.9})
    assert json.loads(_fingerprint("settings", hot))["top_p"] == 0.9


@pytest.mark.parametrize(
    ("values", "key", "says"),
    [
        ({"temperature": -0.1}, "temperature", "greater than or equal to 0"),
        ({"temperature": float("nan")}, "temperature", "finite"),
        ({"temperature": 0.5, "use_model_defaults": True}, "temperature", "use_model_defaults"),
        ({"top_p": 0}, "top_p", "greater than 0"),
        ({"top_p": 1.5}, "top_p", "less than or equal to 1"),
        ({"top_k": -1}, "top_k", "greater than or equal to 0"),
        ({"samples": 0}, "samples", "greater than or equal to 1"),
        ({"samples": 4}, "samples", "4 identical greedy answers"),
        ({"temperatures": [0.7, -1]}, "temperatures", "finite and >= 0"),
    ],
)
def test_bad_sampling_values_are_refused_in_one_line_naming_the_key(
    values: dict[str, object], key: str, says: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        build_config("demo", {"generation": values}, source="run.yaml")
    message = str(refused.value)
    assert "\n" not in message
    assert f"generation.{key}: " in message and says in message
    assert message.startswith("invalid configuration (run.yaml)")


def test_each_sample_has_a_stable_seed_of_its_own() -> None:
    args = (0, "hf:smollm2-135m", "builtin", "q1", "base", 0)
    seed = sample_seed(*args)
    assert 0 <= seed < 2**SEED_BITS
    # Another process (another hash salt) derives the same seed.
    code = f"from sago_core.sample_seeds import sample_seed; print(sample_seed(*{args!r}))"
    other = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "123"},
        cwd=Path(__file__).resolve().parents[2],
    )
    assert int(other.stdout) == seed
    # Every input counts.
    changed = [
        (1, *args[1:]),
        (0, "hf:other", *args[2:]),
        (*args[:2], "other", *args[3:]),
        (*args[:3], "q2", *args[4:]),
        (*args[:4], "replay", 0),
        (*args[:5], 1),
    ]
    assert len({seed, *(sample_seed(*c) for c in changed)}) == 1 + len(changed)


NOISE_ONLY = VariantGrid.model_validate(noise_only())


def test_the_dry_run_plan_states_the_decoding_and_counts_k_answers_per_text(
    tmp_path: Path,
) -> None:
    from sago_core.artifacts.layout import RunLayout
    from sago_core.backends.target import run_targets
    from sago_core.run_plan import plan_run, render_plan

    greedy = RunConfig(models=("mock:m",), runs_dir=tmp_path, variants=NOISE_ONLY)
    layout = RunLayout.of(greedy.runs_dir, greedy.resolved_run_id())
    plan = plan_run(greedy, PROMPTS, run_targets(greedy), layout, {})
    # 2 prompts x (base + 2 noise variants + replay) = 8 texts
    assert plan.generations == {"mock:m": 8}
    assert "Decoding: greedy (T = 0), one answer per prompt text" in render_plan(plan, greedy)

    # K > 1 is refused at parse for now; the plan already counts it (built unvalidated).
    hot = greedy.generation.model_copy(update={"temperature": 0.7, "top_p": 0.9, "samples": 3})
    sampled = greedy.model_copy(update={"generation": hot})
    plan = plan_run(sampled, PROMPTS, run_targets(sampled), layout, {})
    assert plan.generations == plan.teacher_forced == {"mock:m": 24}
    text = render_plan(plan, sampled)
    assert (
        "Decoding: sampled (temperature 0.7, top-p 0.9, top-k off, seed 0), 3 samples per "
        "prompt text, each with its own seed"
    ) in text
    assert "mock:m: 24 generations (at most 2400 new tokens)" in text
