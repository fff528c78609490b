"""The transfer report recomputed from two runs' artifacts written by hand (deltas, instances,
prompts, run config): every expected change below is written out from the deltas chosen, not
recomputed with the code under test.

The design: datasets quiz (trained; q1-q6 train prompts, q7 held out) and facts (held out;
f1, f2 "train" prompts, f3 held out); each prompt has one register variant (the trained
family) and one noise variant (held out), measured on the bleu axis only. Before, every
|delta_norm| is 0.4. After: register variants of quiz's train prompts 0.1, 0.2, 0.1, 0.2, 0.1,
0.2 (s changes by -0.3, -0.2, ...: mean -0.25); q7's register 0.2 (-0.2, one prompt: no
test); facts' register 0.1 everywhere (-0.3 each); noise unchanged (0 each).
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from sago_core.artifacts.schemas import DELTAS, PROMPTS, instances_schema
from sago_core.artifacts.store import write_parquet
from sago_core.errors import ConfigError, InputError
from sago_core.training.split import Split, SplitSpec
from sago_core.training.transfer import (
    check_transfer_design,
    correctness_table,
    render_transfer,
    transfer_table,
)

QUIZ_TRAIN = [f"q{i}" for i in range(1, 7)]
PROMPTS_BY_DATASET = {"quiz": [*QUIZ_TRAIN, "q7"], "facts": ["f1", "f2", "f3"]}
SPLIT = Split(
    SplitSpec(held_out_families=("noise",), held_out_datasets=("facts",)),
    ("register",),
    ("noise",),
    ("quiz",),
    ("facts",),
    {"quiz": tuple(QUIZ_TRAIN), "facts": ("f1", "f2")},
    {"quiz": ("q7",), "facts": ("f3",)},
)
REGISTER, NOISE = "register:2:1:suffix", "noise:spacing:5:global"
AFTER_REGISTER = dict(zip(QUIZ_TRAIN, [0.1, 0.2, 0.1, 0.2, 0.1, 0.2], strict=True)) | {
    "q7": 0.2,
    "f1": 0.1,
    "f2": 0.1,
    "f3": 0.1,
}


def _run(folder: Path, model: str, after: bool, correct: dict[str, bool], seed: int = 0) -> Path:
    deltas, instances, prompts = [], [], []
    for dataset, ids in PROMPTS_BY_DATASET.items():
        for prompt_id in ids:
            prompts.append(
                {"dataset": dataset, "prompt_id": prompt_id, "prompt": f"Question {prompt_id}?"}
            )
            for variant_id in (REGISTER, NOISE):
                family = variant_id.split(":")[0]
                value = AFTER_REGISTER[prompt_id] if after and family == "register" else 0.4
                key = {"model": model, "dataset": dataset, "prompt_id": prompt_id}
                deltas.append(
                    {**key, "variant_id": variant_id, "family": family, "axis": "bleu"}
                    | {"delta": -value * 100, "delta_norm": -value}
                )
                row = dict.fromkeys(instances_schema())
                row.update(key, variant_id=variant_id, family=family, d_bleu=-value)
                row["base_correct"] = correct.get(prompt_id)
                instances.append(row)
    write_parquet(pl.DataFrame(deltas, schema=DELTAS), folder / "deltas.parquet", DELTAS)
    schema = instances_schema()
    write_parquet(pl.DataFrame(instances, schema=schema), folder / "instances.parquet", schema)
    write_parquet(pl.DataFrame(prompts, schema=PROMPTS), folder / "prompts.parquet", PROMPTS)
    config = {"seed": seed, "variants": {"register": {"strengths": [2]}}, "models": [model]}
    (folder / "run_config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


BEFORE_CORRECT = {p: True for p in [*QUIZ_TRAIN, "q7", "f1", "f2", "f3"]}
AFTER_CORRECT = BEFORE_CORRECT | {"q1": False}  # one train prompt lost


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    before = _run(tmp_path / "before", "hf:base", False, BEFORE_CORRECT)
    after = _run(tmp_path / "after", "hf:trained/model", True, AFTER_CORRECT)
    return before, after


def _cell(table: pl.DataFrame, families: str, prompts: str, datasets: str) -> dict:
    rows = table.filter(
        (pl.col("families") == families)
        & (pl.col("prompts") == prompts)
        & (pl.col("datasets") == datasets)
        & (pl.col("axis") == "bleu")
    ).to_dicts()
    assert len(rows) == 1
    return rows[0]


def test_the_matrix_per_cell(runs: tuple[Path, Path]) -> None:
    before, after = runs
    check_transfer_design(before, after)
    table = transfer_table(before, after, SPLIT, margin=0.02)
    assert table.height == 8 * 6  # 2 x 2 x 2 cells, every axis

    in_sample = _cell(table, "trained", "train", "train")
    assert in_sample["n"] == 6
    assert in_sample["mean_diff"] == pytest.approx(-0.25)
    assert in_sample["ci_low"] < -0.25 < in_sample["ci_high"] < 0
    assert in_sample["verdict"] == "b_better" and in_sample["transfers"] == "in-sample"

    datasets = _cell(table, "trained", "train", "held_out")  # facts f1, f2: -0.3 each
    assert datasets["n"] == 2 and datasets["mean_diff"] == pytest.approx(-0.3)
    assert datasets["ci_low"] is None and "fewer than 5" in datasets["ci_missing_reason"]
    assert datasets["verdict"] == "b_better" and datasets["transfers"] == "yes"

    one_prompt = _cell(table, "trained", "held_out", "train")  # q7 alone: no test
    assert one_prompt["n"] == 1 and one_prompt["mean_diff"] == pytest.approx(-0.2)
    assert one_prompt["verdict"] is None and one_prompt["transfers"] == "undecided"

    families = _cell(table, "held_out", "train", "train")  # noise unchanged on q1-q6
    assert families["n"] == 6 and families["mean_diff"] == pytest.approx(0.0)
    assert families["verdict"] == "equivalent" and families["transfers"] == "no"

    empty = table.filter(pl.col("axis") == "act")  # no act delta in either run
    assert set(empty["n"].to_list()) == {0} and empty["mean_diff"].is_null().all()
    assert set(empty["transfers"].to_list()) == {"in-sample", "undecided"}

    correctness = correctness_table(before, after, SPLIT, margin=0.05)
    train = correctness.filter((pl.col("prompts") == "train") & (pl.col("datasets") == "train"))
    row = train.to_dicts()[0]
    assert row["n"] == 6 and row["correct_before"] == 1.0
    assert row["correct_after"] == pytest.approx(5 / 6)
    assert row["mean_diff"] == pytest.approx(-1 / 6)
    assert row["capability"] == "undecided"  # one loss in six: neither shown nor ruled out
    kept = correctness.filter(pl.col("datasets") == "held_out").to_dicts()
    # f1, f2 unchanged: kept; f3 alone (held-out prompt): one prompt, no test
    assert [r["capability"] for r in kept] == ["kept", "undecided"]

    text = render_transfer(table, correctness, 0.02, 0.05)
    assert "| trained | train | held_out | bleu | 2 | -0.3000 | NA (2 prompt(s)" in text
    assert "| train | train | 6 | 1.000 | 0.833 | -0.1667 |" in text


def test_runs_of_different_designs_are_refused(runs: tuple[Path, Path], tmp_path: Path) -> None:
    before, _ = runs
    other_seed = _run(tmp_path / "seed1", "hf:trained/model", True, AFTER_CORRECT, seed=1)
    with pytest.raises(ConfigError, match="the runs' configs differ in what makes them"):
        check_transfer_design(before, other_seed)
    fewer = _run(tmp_path / "fewer", "hf:trained/model", True, AFTER_CORRECT)
    deltas = pl.read_parquet(fewer / "deltas.parquet").filter(pl.col("prompt_id") != "f3")
    write_parquet(deltas, fewer / "deltas.parquet", DELTAS)
    with pytest.raises(InputError, match=r"measured different variants \(e.g. facts/f3/"):
        check_transfer_design(before, fewer)


def _finished(run: Path) -> None:
    """The files a finished run holds besides the ones --transfer reads (empty here)."""
    for name in ("summary", "scores", "variants", "generations"):
        (run / f"{name}.parquet").write_bytes(b"")
    (run / "manifest.json").write_text("{}", encoding="utf-8")


def test_sago_compare_transfer_reads_the_trained_models_split_and_fills_its_card(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The second run evaluates hf:<training folder>/model: the split is the one of the data
    that training read (its training.json says where), and the report joins its card."""
    from sago_cli.main import main
    from sago_core.artifacts.store import write_json

    data = tmp_path / "export"
    write_json(SPLIT.records(), data / "split.json")
    trained = tmp_path / "trained"
    write_json({"data": str(data)}, trained / "training.json")
    (trained / "README.md").write_text("# LoRA consistency fine-tune\n", encoding="utf-8")
    before = _run(tmp_path / "before", "hf:base", False, BEFORE_CORRECT)
    after = _run(tmp_path / "after", f"hf:{trained / 'model'}", True, AFTER_CORRECT)
    for run in (before, after):
        _finished(run)
    out = tmp_path / "transfer.parquet"
    assert main(["compare", "--transfer", str(before), str(after), "--out", str(out)]) == 0
    table = pl.read_parquet(out)
    assert table.height == 48
    assert _cell(table, "trained", "train", "held_out")["transfers"] == "yes"
    report = (tmp_path / "transfer.md").read_text(encoding="utf-8")
    assert "| trained | train | held_out | bleu | 2 | -0.3000 |" in report
    card = (trained / "README.md").read_text(encoding="utf-8")
    assert card.startswith("# LoRA consistency fine-tune\n\n## Transfer report\n")
    assert "| trained | train | held_out | bleu | 2 | -0.3000 |" in card
    # again: the section is replaced, not repeated
    assert main(["compare", "--transfer", str(before), str(after), "--out", str(out)]) == 0
    assert (trained / "README.md").read_text(encoding="utf-8").count("## Transfer report") == 1
    capsys.readouterr()
    other = _run(tmp_path / "other", "hf:other", True, AFTER_CORRECT)
    _finished(other)
    assert main(["compare", "--transfer", str(before), str(other)]) == 2
    assert "name the training's split with --split DATA/split.json" in capsys.readouterr().err
