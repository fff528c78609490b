"""Configuration keys renamed for one meaning per word (``judge`` -> ``register_judge``,
``api.budget`` -> ``api.spending``): the old name still reads, with the same meaning, a
configuration keeps the run id it had before the rename, and both names at once fail in one
line naming the new one."""

from __future__ import annotations

import pytest

from sago_core.config import ApiSettings, RunConfig, build_config
from sago_core.errors import ConfigError

OLD = {
    "judge": {"model": "hf:smollm2-135m", "batch_size": 8},
    "api": {"budget": {"max_requests": 7}},
}
NEW = {
    "register_judge": {"model": "hf:smollm2-135m", "batch_size": 8},
    "api": {"spending": {"max_requests": 7}},
}
# The run ids these configurations had before the rename (computed by the code of then):
# the same configuration must land in the same run folder and keep resuming it.
RUN_ID_BEFORE = "demo-5c2c27e9bd87"
DEMO_RUN_ID_BEFORE = "demo-c30dbf3a6301"


def test_old_and_new_names_mean_the_same_and_keep_the_run_id() -> None:
    old, new = build_config("demo", OLD), build_config("demo", NEW)
    assert old == new
    assert new.register_judge.model == "hf:smollm2-135m" and new.register_judge.batch_size == 8
    assert new.api.spending.max_requests == 7
    assert new.resolved_run_id() == RUN_ID_BEFORE
    assert build_config("demo").resolved_run_id() == DEMO_RUN_ID_BEFORE


def test_a_saved_configuration_with_the_old_names_validates() -> None:
    saved = build_config("demo").model_dump(mode="json")
    saved["judge"] = saved.pop("register_judge") | {"model": "hf:smollm2-135m"}
    saved["api"]["budget"] = saved["api"].pop("spending") | {"max_cost_usd": 2.0}
    config = RunConfig.model_validate(saved)
    assert config.register_judge.model == "hf:smollm2-135m"
    assert config.api.spending.max_cost_usd == 2.0
    written = config.model_dump(mode="json")  # written back under the new names only
    assert "register_judge" in written and "judge" not in written
    assert "spending" in written["api"] and "budget" not in written["api"]
    assert ApiSettings.model_validate({"budget": {"max_tokens": 3}}).spending.max_tokens == 3


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"judge": {}, "register_judge": {}}, "judge is the old name of register_judge"),
        (
            {"api": {"budget": {}, "spending": {}}},
            "api.budget is the old name of api.spending",
        ),
    ],
)
def test_both_names_at_once_fail_in_one_line_naming_the_new_one(
    values: dict[str, object], named: str
) -> None:
    with pytest.raises(ConfigError, match=named) as caught:
        build_config("demo", values, source="run.yaml")
    assert "\n" not in str(caught.value) and "run.yaml" in str(caught.value)


def test_a_run_saved_under_the_old_names_compares_with_one_under_the_new() -> None:
    from sago_core.config.saved import config_differences

    new = build_config("demo", NEW).model_dump(mode="json")
    old = {k: v for k, v in new.items() if k != "register_judge"} | {"judge": new["register_judge"]}
    assert config_differences(old, new) == []
    other = old | {"judge": {"model": "hf:other", "batch_size": 8}}
    (difference,) = config_differences(other, new)
    assert difference.setting == "register_judge.model"
    assert (difference.value_a, difference.value_b) == ("hf:other", "hf:smollm2-135m")
