"""A mistyped config key is named with the nearest allowed key at its place."""

from __future__ import annotations

import pytest

from sago_core.backends.model_source import resolve_local_model
from sago_core.config import build_config
from sago_core.errors import ConfigError, ModelNotFoundError
from sago_core.study.config import build_study_config


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (
            {"generaton": {"max_new_tokens": 3}},
            "generaton: unknown key; did you mean 'generation'?",
        ),
        (
            {"generation": {"max_new_token": 3}},
            "generation.max_new_token: unknown key; did you mean 'max_new_tokens'?",
        ),
        (
            {"variants": {"noise": {"spacin": [5]}}},
            "variants.noise.spacin: unknown key; did you mean 'spacing'?",
        ),
        ({"bertscore": {"modle": "x"}}, "bertscore.modle: unknown key; did you mean 'model'?"),
    ],
)
def test_a_typo_gets_the_nearest_key_at_its_place(values: dict, expected: str) -> None:
    with pytest.raises(ConfigError) as refused:
        build_config("demo", values, source="study.yaml")
    assert str(refused.value) == f"invalid configuration (study.yaml): {expected}"


def test_a_key_like_no_other_lists_the_allowed_ones() -> None:
    with pytest.raises(ConfigError) as refused:
        build_config("demo", {"generation": {"zqxj": 1}})
    message = str(refused.value)
    assert "generation.zqxj: unknown key (allowed: " in message
    assert "max_new_tokens" in message and "did you mean" not in message


def test_other_errors_keep_pydantics_words() -> None:
    expected = r"\(command line\): n: Input should be greater than or equal to 1$"
    with pytest.raises(ConfigError, match=expected):
        build_config("demo", {"n": 0})


def test_the_consistency_file_gets_suggestions_too() -> None:
    with pytest.raises(ConfigError, match=r"in_distributon: unknown key; did you mean "):
        build_study_config(
            {"in_distributon": "triviaqa", "families": {"a": ["hf:x"]}}, source="c.yaml"
        )


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (
            {"max_new_tokens": 8},
            "max_new_tokens: unknown key; it belongs in another section: "
            "did you mean 'generation.max_new_tokens'?",
        ),
        (
            {"generation": {"spacing": [3]}},
            "generation.spacing: unknown key; it belongs in another section: "
            "did you mean 'variants.noise.spacing'?",
        ),
        (
            {"max_new_token": 8},
            "max_new_token: unknown key; did you mean 'generation.max_new_tokens'?",
        ),
    ],
)
def test_a_key_at_the_wrong_level_is_pointed_to_its_section(values: dict, expected: str) -> None:
    with pytest.raises(ConfigError) as refused:
        build_config("demo", values, source="run.yaml")
    assert str(refused.value) == f"invalid configuration (run.yaml): {expected}"


def test_an_unknown_local_model_name_suggests_the_closest_embedded_alias() -> None:
    with pytest.raises(ModelNotFoundError) as refused:
        resolve_local_model("smollm2-13m")
    assert str(refused.value) == (
        "model path 'smollm2-13m' does not exist; did you mean 'smollm2-135m' "
        "(the embedded SmolLM2-135M-Instruct)?"
    )
    with pytest.raises(ModelNotFoundError, match=r"^model path './nowhere' does not exist$"):
        resolve_local_model("./nowhere")
