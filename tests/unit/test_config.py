"""Strict config: unknown keys and bad values are errors that name the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from sago_core.config import PRESETS, build_config, read_config_file
from sago_core.errors import ConfigError


def test_presets_merge_with_file_and_overrides() -> None:
    config = build_config("demo", {"n": 5, "generation": {"batch_size": 4}}, {"seed": 9})
    assert config.n == 5 and config.seed == 9
    assert config.generation.batch_size == 4
    assert config.generation.max_new_tokens == PRESETS["demo"].generation.max_new_tokens
    assert config.bertscore.model == "minilm-l6"
    paper = build_config("paper")
    assert paper.bertscore.model == "roberta-large" and paper.bertscore.semantic_threshold == 0.85
    assert paper.variants.register_grid is not None
    assert len(paper.variants.register_grid.strengths) == 10


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"nn": 3}, "nn"),
        ({"generation": {"max_new_token": 3}}, "generation.max_new_token"),
        ({"n": 0}, "n"),
        ({"variants": {"register": {"strengths": [3]}}}, "variants.register.strengths"),
        ({"variants": {"noise": {"capitalization": [150]}}}, "variants.noise.capitalization"),
        ({"models": []}, "models"),
    ],
)
def test_bad_values_name_the_field(values: dict, field: str) -> None:
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        build_config("demo", values, source="test.yaml")


def test_result_hash_ignores_where_results_go() -> None:
    a = build_config("demo", {}, {"runs_dir": Path("/tmp/a")})
    b = build_config("demo", {}, {"runs_dir": Path("/tmp/b")})
    assert a.result_hash() == b.result_hash()
    assert a.resolved_run_id() == b.resolved_run_id()
    assert build_config("demo", {}, {"seed": 1}).resolved_run_id() != a.resolved_run_id()


def test_config_file_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        read_config_file(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("- just\n- a list\n")
    with pytest.raises(ConfigError, match="mapping"):
        read_config_file(bad)
    with pytest.raises(ConfigError, match="unknown preset"):
        build_config("huge")


def test_the_paper_preset_is_the_field_defaults() -> None:
    from sago_core.config import DATASET_NAMES, RunConfig

    assert build_config("paper") == RunConfig() == PRESETS["paper"]
    assert RunConfig().datasets == DATASET_NAMES and RunConfig().n == 16
    assert build_config(None).preset == "demo"  # the command line's default


def test_chat_template_kwargs_are_a_mapping_in_files_and_hashable_inside() -> None:
    config = build_config(
        "demo", {"generation": {"chat_template_kwargs": {"enable_thinking": True}}}
    )
    assert config.generation.chat_template_kwargs == (("enable_thinking", True),)
    assert hash(config.generation)  # frozen settings stay usable as cache keys
    dumped = config.model_dump(mode="json")["generation"]["chat_template_kwargs"]
    assert dumped == {"enable_thinking": True}
    assert (
        build_config("demo", {"generation": config.model_dump(mode="json")["generation"]}) == config
    )


def test_devices_must_split_into_whole_workers() -> None:
    with pytest.raises(ConfigError, match="multiple of devices_per_worker"):
        build_config("demo", {"orchestration": {"devices": 3, "devices_per_worker": 2}})
    config = build_config("demo", {"orchestration": {"devices": 4, "devices_per_worker": 2}})
    assert config.orchestration.devices_per_worker == 2
