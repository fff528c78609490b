"""The fine-tuning series trains on rows no evaluation set holds: proven for the built-in
study and for examples/consistency.yaml, and an overlapping configuration is refused with the
rows named (by prompt id and by normalised question text)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sago_core.data.builtin import builtin_prompts
from sago_core.data.loading import load_prompts, load_run_prompts
from sago_core.data.prompt import Prompt
from sago_core.errors import ConfigError
from sago_core.study.config import build_study_config
from sago_core.study.series import check_training_splits, training_split
from sago_core.training.split import (
    BUILTIN_TRAINING,
    SPLIT_FILE,
    TrainingSplit,
    builtin_training_prompts,
    check_disjoint,
)

ROOT = Path(__file__).resolve().parents[2]


def _plain(text: str) -> str:
    """Independent of the code under test: lower case, letters and digits only."""
    words = re.sub(r"[^a-z0-9 ]", " ", text.lower()).split()
    return " ".join(w for w in words if w not in {"a", "an", "the"})


def _assert_apart(training: list[Prompt], evaluation: list[Prompt]) -> None:
    assert not {p.prompt_id for p in training} & {p.prompt_id for p in evaluation}
    assert not {_plain(p.prompt) for p in training} & {_plain(p.prompt) for p in evaluation}


def _study(series: dict | None = None, **evaluation: object) -> dict:
    return {
        "make_series": {"folder": "unused", **(series or {})},
        "in_distribution": "builtin_triviaqa",
        "out_of_distribution": ["builtin_nq_open", "builtin_hotpotqa"],
        "evaluation": {"preset": "demo", "n": 6, **evaluation},
    }


def test_the_builtin_training_split_is_apart_from_every_builtin_prompt() -> None:
    training = builtin_training_prompts()
    assert len(training) == 24 and all(p.references for p in training)
    _assert_apart(training, builtin_prompts())  # all 36, not only a sample


def test_the_default_study_trains_on_its_own_split() -> None:
    study = build_study_config(_study(), source="study.yaml")
    assert study.make_series is not None and study.make_series.training.dataset == BUILTIN_TRAINING
    evaluation = load_run_prompts(study.evaluation)
    split = training_split(study.make_series, evaluation, None)
    assert split.name == BUILTIN_TRAINING and len(split.prompts) == 24
    _assert_apart(list(split.prompts), evaluation)
    assert set(study.series) == {"finetune", "quantize"}
    assert len(study.series["finetune"]) >= 7  # enough for the block permutation test


def test_the_example_study_holds_its_id_training_split_out(
    monkeypatch: pytest.MonkeyPatch, shared_data: Path
) -> None:
    import yaml

    monkeypatch.chdir(ROOT)  # the example's paths are relative to the project root
    values = yaml.safe_load((ROOT / "examples" / "consistency.yaml").read_text())
    values["evaluation"]["data_dir"] = str(shared_data)  # what `--data-dir` gives it
    study = build_study_config(values, source="examples/consistency.yaml")
    assert study.make_series is not None
    evaluation = load_run_prompts(study.evaluation)
    assert {p.dataset for p in evaluation} >= {study.in_distribution, *study.out_of_distribution}
    split = training_split(study.make_series, evaluation, study.evaluation.data_dir)
    assert {p.dataset for p in split.prompts} == {study.in_distribution}  # ID training data
    assert len(split.prompts) == study.make_series.training.n
    _assert_apart(list(split.prompts), evaluation)


def test_an_overlapping_training_split_is_refused_naming_the_rows() -> None:
    study = build_study_config(
        _study({"training": {"dataset": "builtin", "n": 36, "hold_out_evaluated": False}}),
        source="s",
    )
    evaluation = load_run_prompts(study.evaluation)
    with pytest.raises(ConfigError, match=r"make_series\.training.*overlaps.*36 rows.*builtin-al1"):
        training_split(study.make_series, evaluation, None)  # type: ignore[arg-type]


def test_the_same_question_under_another_id_is_an_overlap() -> None:
    evaluation = builtin_prompts()
    reworded = Prompt(
        "mine", "my-1", "which planet is known as THE red planet", ("Mars",), "train.csv, row 3"
    )
    with pytest.raises(ConfigError, match=r"train\.csv, row 3.*builtin_triviaqa/builtin-tr1"):
        check_disjoint(TrainingSplit("mine", (reworded,)), evaluation, "here")


def _fake_checkpoint(folder: Path, split: TrainingSplit | None, name: str = SPLIT_FILE) -> str:
    folder.mkdir(parents=True)
    (folder / "sago_checkpoint.json").write_text(json.dumps({"family": "finetune", "step": 0}))
    if split is not None:
        (folder / name).write_text(json.dumps(split.to_json()))
    return f"hf:{folder}"


def test_checkpoints_trained_on_evaluated_prompts_are_refused(tmp_path: Path) -> None:
    old_default = load_prompts(("builtin",), None, 10**6, 0)  # what the old series trained on
    leaky = TrainingSplit("builtin", tuple(old_default))
    clean = TrainingSplit(BUILTIN_TRAINING, tuple(builtin_training_prompts()))
    # step 1 was made before the series' split took the name split.json: still read
    names = {1: "training_split.json"}
    series = {
        "ft": [
            _fake_checkpoint(
                tmp_path / f"step-{i}", leaky if i == 3 else clean, names.get(i, SPLIT_FILE)
            )
            for i in range(4)
        ]
    }
    study = build_study_config(
        {
            "series": series,
            "in_distribution": "builtin_triviaqa",
            "out_of_distribution": ["builtin_nq_open", "builtin_hotpotqa"],
            "evaluation": {"preset": "demo", "n": 2},
        },
        source="s",
    )
    evaluation = load_run_prompts(study.evaluation)
    with pytest.raises(ConfigError, match=r"series\.ft\[3\].*overlaps the evaluation"):
        check_training_splits(study, evaluation)
    unrecorded = _fake_checkpoint(tmp_path / "legacy", None)
    study = study.model_copy(update={"series": {"ft": (*series["ft"][:3], unrecorded)}})
    with pytest.raises(ConfigError, match=r"series\.ft\[3\].*without a recorded training split"):
        check_training_splits(study, evaluation)
    rows = check_training_splits(
        study.model_copy(update={"series": {"ft": tuple(series["ft"][:3])}}), evaluation
    )
    assert [r["training_split"] for r in rows] == [BUILTIN_TRAINING] * 3
