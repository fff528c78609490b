"""`sago series finetune` trains through `sago train`'s SFT trainer (every weight, no
adapters) on the session's tiny model: one folder per listed step, step 0 the starting
weights, each later one moved from the one before, the split it learned from stored as
split.json beside a note that names the step, and no file in pickle."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sago_core.backends.model_source import resolve_local_model
from sago_core.training.split import (
    SPLIT_FILE,
    TrainingSplit,
    builtin_training_prompts,
    read_checkpoint_split,
)
from tests.train_env import require_train


@pytest.mark.slow
def test_a_finetune_series_saves_each_listed_step_from_the_trainer(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    require_train()
    from safetensors.torch import load_file

    from sago_core.checkpoints.series import finetune_series, read_note

    split = TrainingSplit("builtin_train", tuple(builtin_training_prompts()[:4]))
    source = resolve_local_model(str(tiny_model_dir))
    saved = finetune_series(
        source, split, [2, 0, 1], tmp_path / "ft", learning_rate=1e-2, batch_size=2
    )
    assert [p.name for p in saved] == ["step-0000", "step-0001", "step-0002"]
    weights = [load_file(str(p / "model.safetensors")) for p in saved]
    base = load_file(str(next(tiny_model_dir.glob("*.safetensors"))))
    name = "model.layers.0.self_attn.q_proj.weight"
    assert weights[0][name].equal(base[name])
    assert not weights[1][name].equal(weights[0][name])
    assert not weights[2][name].equal(weights[1][name])
    for step, folder in zip((0, 1, 2), saved, strict=True):
        note = read_note(folder)
        assert note is not None and note["step"] == step and note["family"] == "finetune"
        assert note["training_digest"] == split.digest()
        assert read_checkpoint_split(folder) == split
        assert (folder / SPLIT_FILE).is_file()
        pickled = [p.name for p in folder.iterdir() if p.suffix in (".bin", ".pt", ".pth")]
        assert not pickled, pickled
    assert json.loads((saved[2] / SPLIT_FILE).read_text())["name"] == "builtin_train"
