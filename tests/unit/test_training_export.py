"""`sago export --training KIND`: TRL-format training data from a run's instances, the split
stored beside it, and the card. The run is written by hand (instances.parquet only); every
expected row, count and split side below is written out, not recomputed.

Each file is checked here against TRL's documented conversational formats (docs "Dataset
formats and types": prompt-completion = `prompt` and `completion`, preference = `prompt`,
`chosen`, `rejected`; each a list of {"role", "content"} messages) and read with pyarrow's
JSON reader, which `datasets`' json builder uses; tests/unit/test_training_trl.py trains a
step on them in TRL's SFT and DPO trainers.

The split with seed 0 and the default shares (held out: 0.3 of the prompts, 0.3 of the
datasets, families structural/script/language) puts quiz's q3 and q5 on the held-out side
(ranked by sha256 of seed, kind and id), the dataset `facts` held out, `structural` held out.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.json as pa_json
import pytest

from sago_cli.main import main
from sago_core.artifacts.schemas import instances_schema
from sago_core.artifacts.store import write_parquet
from sago_core.errors import ConfigError, InputError
from sago_core.training.export import Filters, export_training, select_training
from sago_core.training.split import SplitSpec, draw_split, read_split

MODEL = "hf:tiny"
BASE = {
    "q1": ("What is the capital of France?", "Paris", True),
    "q2": ("How many legs has a spider?", "Six", False),
    "q3": ("Who wrote Hamlet?", "Shakespeare", True),
    "q4": ("Describe a sunset.", "Orange light fades.", None),  # no references
    "q5": ("What is 2 + 2?", "4", True),
    "q6": ("Which ocean is largest?", None, None),  # the base gave no answer
    "f1": ("What is H2O?", "Water", True),
}


def _row(prompt_id: str, variant_id: str, prompt: str, answer: str | None, **d: float) -> dict:
    base_prompt, base_answer, correct = BASE[prompt_id]
    row: dict[str, Any] = {c: None for c in instances_schema()}
    family, subtype, strength, position = variant_id.split(":")
    row.update(
        model=MODEL,
        dataset="facts" if prompt_id.startswith("f") else "quiz",
        prompt_id=prompt_id,
        variant_id=variant_id,
        family=family,
        subtype=subtype,
        strength=float(strength),
        position=position,
        base_prompt=base_prompt,
        variant_prompt=prompt,
        base_answer=base_answer,
        variant_answer=answer,
        base_correct=correct,
    )
    row.update({f"d_{axis}": value for axis, value in d.items()})
    return row


REGISTER, NOISE, STRUCTURAL = "register:-2:1:suffix", "noise:spacing:5:global", "structural:b:1:g"
ROWS = [
    _row("q1", REGISTER, "What is the capital of France, you fool?", "Lyon", bleu=0.5),
    _row("q1", NOISE, "What is  the capital of France?", "Paris.", bleu=0.01, bert=0.02),
    _row("q1", STRUCTURAL, "- capital of France?", "Marseille", bleu=0.9),
    _row("q2", REGISTER, "Spider legs, please?", "Eight", bleu=0.4),
    _row("q3", REGISTER, "Hamlet's author, please?", "Marlowe", bleu=0.6),
    _row("q5", NOISE, "What is 2 +  2?", "5", bleu=0.8),
    _row("q4", NOISE, "Describe a  sunset.", "Orange light fades.", act=-0.1),
    _row("q6", REGISTER, "Largest ocean, please?", "Pacific", bleu=0.3),
    _row("f1", REGISTER, "What is H2O, please?", "Ice", bleu=0.7),
]


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "runs" / "demo-abc"
    schema = instances_schema()
    write_parquet(pl.DataFrame(ROWS, schema=schema), folder / "instances.parquet", schema)
    manifest = {"run_id": "demo-abc", "packages": {"sago": "0.1.0"}}
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return folder


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def _assistant(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


def _check_trl_conversational(rows: list[dict[str, Any]], fields: tuple[str, ...]) -> None:
    """TRL's documented layout: the type's fields, each a list of role/content messages; the
    prompt ends with a user turn, every answer field is one assistant turn."""
    for row in rows:
        assert set(fields) <= set(row)
        for name in fields:
            messages = row[name]
            assert isinstance(messages, list) and messages
            for m in messages:
                assert set(m) == {"role", "content"} and isinstance(m["content"], str)
            roles = [m["role"] for m in messages]
            if name in ("prompt", "base_prompt"):
                assert roles[-1] == "user"
            else:
                assert roles == ["assistant"]


def test_each_format_row_by_row(run_dir: Path, tmp_path: Path) -> None:
    out = export_training(run_dir, tmp_path / "train", ["sft", "dpo", "consistency"])
    assert sorted(p.name for p in out.iterdir()) == [
        "README.md",
        "consistency.jsonl",
        "dpo.jsonl",
        "sft.jsonl",
        "split.json",
    ]
    assert _lines(out / "sft.jsonl") == [
        {
            "prompt": _user("What is the capital of France, you fool?"),
            "completion": _assistant("Paris"),
        },
        {"prompt": _user("Describe a  sunset."), "completion": _assistant("Orange light fades.")},
    ]
    assert _lines(out / "dpo.jsonl") == [
        {
            "prompt": _user("What is the capital of France, you fool?"),
            "chosen": _assistant("Paris"),
            "rejected": _assistant("Lyon"),
        }
    ]
    assert _lines(out / "consistency.jsonl")[1] == {
        "prompt": _user("Describe a  sunset."),
        "completion": _assistant("Orange light fades."),
        "base_prompt": _user("Describe a sunset."),
        "dataset": "quiz",
        "prompt_id": "q4",
        "variant_id": NOISE,
        "family": "noise",
    }
    _check_trl_conversational(_lines(out / "sft.jsonl"), ("prompt", "completion"))
    _check_trl_conversational(_lines(out / "dpo.jsonl"), ("prompt", "chosen", "rejected"))
    _check_trl_conversational(
        _lines(out / "consistency.jsonl"), ("prompt", "completion", "base_prompt")
    )
    message = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
    for kind, fields in (("sft", ("prompt", "completion")), ("dpo", ("prompt", "chosen"))):
        table = pa_json.read_json(out / f"{kind}.jsonl")
        assert all(table.schema.field(f).type == message for f in fields)


def test_filters_count_every_drop(run_dir: Path) -> None:
    selected = select_training(run_dir, ["sft", "dpo"], SplitSpec(), Filters())
    assert selected.dropped == {
        "held-out split cell (prompt, family or dataset)": 4,  # q1 structural, q3, q5, f1
        "no base answer": 1,  # q6
        "base answer wrong per the references": 1,  # q2
        "no axis over its threshold": 1,  # q1 noise: bleu 0.01, bert 0.02 < 0.05
        "variant answer missing or equal to the base answer (dpo only)": 1,  # q4
    }
    assert selected.n_no_references == 1  # q4 kept without a verdict
    assert selected.kept["variant_id"].to_list() == [REGISTER, NOISE]


def test_per_axis_thresholds(run_dir: Path) -> None:
    selected = select_training(run_dir, ["sft"], SplitSpec(), Filters({"bleu": 0.005}))
    assert selected.kept.select("prompt_id", "variant_id").rows() == [
        ("q1", NOISE),
        ("q1", REGISTER),
    ]  # q4 moved only on act, which is no longer a criterion
    with pytest.raises(ConfigError, match="no axis over its threshold: 3"):  # q1 x2, q4
        select_training(run_dir, ["sft"], SplitSpec(), Filters({"act": 0.2}))


def test_split_is_stored_and_reads_back(run_dir: Path, tmp_path: Path) -> None:
    out = export_training(run_dir, tmp_path / "train", ["sft"])
    stored = json.loads((out / "split.json").read_text(encoding="utf-8"))
    assert stored["prompts"] == {
        "facts": {"train": [], "held_out": ["f1"]},
        "quiz": {"train": ["q1", "q2", "q4", "q6"], "held_out": ["q3", "q5"]},
    }
    assert stored["families"] == {"train": ["noise", "register"], "held_out": ["structural"]}
    assert stored["datasets"] == {"train": ["quiz"], "held_out": ["facts"]}
    split = read_split(out / "split.json")
    assert split.trains_on("quiz", "q1", "register")
    assert not split.trains_on("quiz", "q3", "register")


def test_split_is_deterministic_and_disjoint() -> None:
    keys = [
        (d, f"p{i}", fam)
        for d in ("a", "b", "c")
        for i in range(20)
        for fam in ("noise", "structural")
    ]
    spec = SplitSpec(seed=3, held_out_datasets=("c",))
    first = draw_split(keys, spec)
    shuffled = keys[:]
    random.Random(1).shuffle(shuffled)
    assert draw_split(shuffled, spec) == first
    for d in ("a", "b", "c"):
        train, held = set(first.train_prompts[d]), set(first.held_out_prompts[d])
        assert not train & held and train | held == {f"p{i}" for i in range(20)}
        assert len(held) == 6  # round(0.3 x 20)
    assert draw_split(keys, SplitSpec(seed=4, held_out_datasets=("c",))) != first


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (SplitSpec(held_out_families=("script",)), "no held-out family: none of \\['script'\\]"),
        (
            SplitSpec(held_out_families=("noise", "register", "structural")),
            "holds out every family",
        ),
        (SplitSpec(held_out_datasets=("quiz", "facts")), "holds out every dataset"),
        (SplitSpec(held_out_datasets=()), "no held-out dataset"),
        (SplitSpec(held_out_datasets=("trivia",)), "not in the run"),
    ],
)
def test_a_split_without_both_sides_is_refused(
    run_dir: Path, spec: SplitSpec, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        select_training(run_dir, ["sft"], spec, Filters())


def test_one_dataset_or_one_prompt_cannot_be_split() -> None:
    with pytest.raises(ConfigError, match="the run has 1 dataset \\(a\\)"):
        draw_split([("a", "p1", "noise"), ("a", "p2", "structural")], SplitSpec())
    keys = [("a", "p1", "noise"), ("b", "p1", "structural"), ("b", "p2", "noise")]
    with pytest.raises(ConfigError, match="dataset a has 1 prompt"):
        draw_split(keys, SplitSpec(held_out_datasets=("b",)))
    with pytest.raises(ConfigError, match=r"prompt_share 1\.0"):
        SplitSpec(prompt_share=1.0)


def test_bad_inputs_are_refused_in_one_line(run_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="'tone' is not an axis"):
        Filters({"tone": 0.1})
    with pytest.raises(ConfigError, match="no sft example is left after the filters"):
        select_training(run_dir, ["sft"], SplitSpec(), Filters({"bleu": 0.95}))
    with pytest.raises(ConfigError, match="choose from sft, dpo, consistency"):
        select_training(run_dir, ["kto"], SplitSpec(), Filters())
    with pytest.raises(ConfigError, match="--model hf:other: not in the run"):
        select_training(run_dir, ["sft"], SplitSpec(), Filters(), "hf:other")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(ConfigError, match="new or empty folder"):
        export_training(run_dir, tmp_path / "full", ["sft"])
    (run_dir / "instances.parquet").unlink()
    with pytest.raises(InputError, match=r"no instances\.parquet"):
        select_training(run_dir, ["sft"], SplitSpec(), Filters())


def test_cli_writes_the_folder_and_card(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "train"
    argv = ["export", str(run_dir), "--out", str(out), "--training", "sft", "--training", "dpo"]
    assert main([*argv, "--min-delta", "bleu=0.005", "--held-out-datasets", "facts"]) == 0
    assert len(_lines(out / "sft.jsonl")) == 2 and len(_lines(out / "dpo.jsonl")) == 2
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "config_name: sft" in card and "path: dpo.jsonl" in card
    assert "model `hf:tiny` (sago 0.1.0)" in card
    assert "- divergence: an instance is kept when any axis reaches its threshold" in card
    assert "bleu >= 0.005" in card
    assert "| family | sft | dpo |" in card and "| register | 1 | 1 |" in card
    assert "| noise | 1 | 1 |" in card  # q1 noise: "Paris." is not "Paris"
    assert "| quiz | 2 | 2 |" in card
    assert "- families trained: noise, register; held out: structural" in card


def test_cli_refuses_in_one_line(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "train"
    argv = ["export", "training", str(run_dir), "--out", str(out), "--kind", "sft"]
    code = main([*argv, "--min-delta", "bleu"])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert "--min-delta 'bleu': write AXIS=VALUE" in err and "\n" not in err
    assert not out.exists()
