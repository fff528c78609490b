"""Model targets: one per spec, tools on one device, cache keys free of locations, workers
that find the weights under their own path."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from sago_core.axes.activation import layer_cosines
from sago_core.backends.target import (
    behaviour_key,
    cache_fingerprint,
    model_target,
    relocated,
    run_targets,
)
from sago_core.config import build_config
from sago_core.errors import ModelNotFoundError
from sago_core.statistics.correctness import is_correct


def _folder(root: Path, weights: bytes = b"w" * 64) -> Path:
    root.mkdir(parents=True)
    (root / "config.json").write_text('{"model_type": "llama"}')
    (root / "model.safetensors").write_bytes(weights)
    return root


def test_tools_get_one_device_and_models_their_group(tmp_path: Path) -> None:
    model = _folder(tmp_path / "m")
    values = {
        "models": [f"hf:{model}"],
        "orchestration": {"mode": "deployments", "devices": 4, "devices_per_worker": 2},
        "variants": {"structural": {"rewriter": f"hf:{model}"}},
        "judge": {"model": f"hf:{model}"},
    }
    targets = run_targets(build_config("demo", values))
    evaluated = targets.models[f"hf:{model}"]
    assert evaluated.devices == 2
    assert targets.rewriter is not None and targets.rewriter.devices == 1
    assert targets.rewriter.identity == evaluated.identity  # weights resolved once, reused
    alone = run_targets(build_config("demo", {**values, "orchestration": {}}))
    assert alone.rewriter == alone.models[f"hf:{model}"]  # one device each: one engine


def test_cache_keys_see_the_weights_not_where_they_lie(tmp_path: Path) -> None:
    """The embedded model's spec names no path, but its weights lie inside the virtual
    environment: moving the checkout or rebuilding the environment must keep the caches."""
    config = build_config("demo", {})
    here = model_target(config, f"hf:{_folder(tmp_path / 'a')}")
    there = model_target(config, f"hf:{_folder(tmp_path / 'b')}")
    other = model_target(config, f"hf:{_folder(tmp_path / 'c', b'x' * 64)}")
    assert here.identity == there.identity != other.identity
    assert here.source is not None and there.source is not None and other.source is not None
    moved = here.model_copy(update={"source": there.source})  # same spec, other place
    assert cache_fingerprint(moved) == cache_fingerprint(here)
    changed = here.model_copy(update={"identity": other.identity, "source": other.source})
    assert cache_fingerprint(changed) != cache_fingerprint(here)


def test_tool_caches_key_on_rendering_options_only_when_they_are_set(tmp_path: Path) -> None:
    spec = f"hf:{_folder(tmp_path / 'm')}"
    plain = model_target(build_config("demo", {}), spec)
    assert behaviour_key(plain) == plain.identity  # default runs keep their caches
    thinking = {"generation": {"chat_template_kwargs": {"enable_thinking": True}}}
    other = model_target(build_config("demo", thinking), spec)
    assert behaviour_key(other) != behaviour_key(plain)
    assert behaviour_key(other).startswith(plain.identity)


def test_a_worker_elsewhere_finds_its_weights_or_refuses_other_ones(tmp_path: Path) -> None:
    config = build_config("demo", {})
    original = _folder(tmp_path / "there")
    target = model_target(config, f"hf:{original}")
    assert relocated(target) == target  # the weights are where the run found them
    copy = tmp_path / "here"
    shutil.copytree(original, copy)
    moved = target.model_copy(update={"model_id": str(copy)})
    shutil.rmtree(original)
    assert relocated(moved).source is not None
    assert relocated(moved).source.location == str(copy)  # type: ignore[union-attr]
    (copy / "model.safetensors").write_bytes(b"changed")
    with pytest.raises(ModelNotFoundError, match="other weights"):
        relocated(moved)


def test_a_non_finite_hidden_state_gives_a_nan_cosine_not_zero() -> None:
    base = np.ones((2, 3), dtype=np.float32)
    variant = base.copy()
    variant[1, 0] = np.nan
    cosines = layer_cosines(variant, base)
    assert cosines[0] == 1.0 and np.isnan(cosines[1])


def test_no_answer_is_neither_right_nor_wrong() -> None:
    assert is_correct(None, ["Paris"]) is None
    assert is_correct("It is Paris.", ["Paris"]) is True
