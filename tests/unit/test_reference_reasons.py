"""Why correctness is missing reaches a run's outputs.

A prompt without reference answers carries its reader's reason in prompts.parquet
(``reference_missing_reason``: Alpaca's ``NO_GOLD_ALPACA``, a file without an answer
column, an open-ended built-in prompt); instances.parquet puts it beside the null verdicts
(``correct_missing_reason``), tails.parquet gives it as ``flip_missing_reason`` and the
report's correctness section names it per dataset. No model, no flow, no figures:
hand-built answers and deltas around the prompts stage's real output.
"""

from __future__ import annotations

import html
import json
import shutil
from pathlib import Path

import polars as pl

from sago_core.config import build_config
from sago_core.data.builtin import OPEN_ENDED
from sago_core.data.datasets import NO_GOLD_ALPACA
from sago_core.data.loading import load_prompts
from sago_core.data.prompt import NO_REASON_RECORDED, NO_REFERENCE_CELL
from sago_core.data.references import GENERIC_NONE
from sago_core.report.page.results import correctness_section as _correctness_section
from sago_core.scoring.prompt_scores import score_prompts
from sago_core.stages.instances import build_instances
from sago_core.stages.prompts import prepare_prompts
from sago_core.statistics.tails import ALL_FAMILIES, tail_statistics
from sago_core.vocabulary import AXES, POOLED

ALPACA_ROWS = [  # AlpacaEval's layout: `output` is text-davinci-003's answer, `gold` is ours
    {"instruction": f"Name the capital of country {i}.", "output": "Paris", "gold": "Paris"}
    for i in range(5)
]


def _prompts(tmp_path: Path) -> pl.DataFrame:
    """prompts.parquet's frame for an Alpaca-layout file, the same file with a named gold
    column, a plain file (one empty answer cell), a file without answers, and the builtin."""
    alpaca = tmp_path / "alpaca_eval.json"
    alpaca.write_text(json.dumps(ALPACA_ROWS), encoding="utf-8")
    gold = shutil.copy(alpaca, tmp_path / "alpaca_gold.json")
    own = tmp_path / "own.jsonl"
    own.write_text(
        "\n".join(json.dumps({"question": q, "answer": a}) for q, a in (("2+2?", "4"), ("Hm?", "")))
        + "\n",
        encoding="utf-8",
    )
    bare = tmp_path / "bare.csv"
    bare.write_text("question\nWhy is the sky blue?\n", encoding="utf-8")
    entries = [str(alpaca), f"{gold}#answer=gold", str(own), str(bare), "builtin"]
    config = build_config("demo", {"datasets": entries, "n": 50, "runs_dir": str(tmp_path)})
    return prepare_prompts(config)


def _reasons(prompts: pl.DataFrame, dataset: str) -> dict[str, str | None]:
    rows = prompts.filter(pl.col("dataset") == dataset).select(
        "prompt_id", "reference_missing_reason"
    )
    return dict(rows.iter_rows())


def test_prompts_parquet_says_why_a_prompt_has_no_references(tmp_path: Path) -> None:
    prompts = _prompts(tmp_path)
    assert set(_reasons(prompts, "alpaca_eval").values()) == {NO_GOLD_ALPACA}
    assert prompts.filter(pl.col("dataset") == "alpaca_eval")["references"].list.len().sum() == 0
    named = prompts.filter(pl.col("dataset") == "alpaca_gold")
    assert named["references"].to_list() == [["Paris"]] * 5
    assert named["reference_missing_reason"].null_count() == 5  # a gold column: no reason
    own = prompts.filter(pl.col("dataset") == "own").sort("prompt")
    assert own["reference_missing_reason"].to_list() == [None, NO_REFERENCE_CELL]  # "2+2?", "Hm?"
    assert set(_reasons(prompts, "bare").values()) == {GENERIC_NONE}
    builtin = _reasons(prompts, "builtin_alpaca")
    assert builtin["builtin-al1"] is None and builtin["builtin-al2"] == OPEN_ENDED
    assert _reasons(prompts, "builtin_nq_open") == dict.fromkeys(
        [f"builtin-nq{i}" for i in range(1, 7)]
    )


def test_the_known_alpaca_dataset_gives_its_reason_unless_a_gold_column_is_named(
    shared_data: Path,
) -> None:
    plain = load_prompts(("alpaca",), shared_data, n=5, seed=0)
    assert [p.no_references for p in plain] == [NO_GOLD_ALPACA] * 5
    named = load_prompts(("alpaca#answer=output",), shared_data, n=5, seed=0)
    assert all(p.references and p.no_references is None for p in named)


def _run(prompts: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Deltas and generations for every prompt: every answer says Paris (right wherever a
    reference is Paris), two register variants, each axis' delta 0.01 x (variant + 1)."""
    deltas, generations = [], []
    for dataset, pid in prompts.select("dataset", "prompt_id").iter_rows():
        key = {"model": "hf:m", "dataset": dataset, "prompt_id": pid}
        generations.append({**key, "variant_id": "base", "prompt_text": "Q?"})
        for v in range(2):
            variant = f"register:{v}:global"
            generations.append({**key, "variant_id": variant, "prompt_text": "Q, please?"})
            for axis in AXES:
                deltas.append(
                    {
                        **key,
                        "variant_id": variant,
                        "family": "register",
                        "subtype": "politeness",
                        "strength": float(v),
                        "position": "global",
                        "axis": axis,
                        "delta": 0.01 * (v + 1),
                        "delta_norm": 0.01 * (v + 1),
                        "missing_reason": None,
                    }
                )
    answers = pl.DataFrame(generations).with_columns(
        pl.lit("It is Paris.").alias("response_text"), pl.lit("It is Paris.").alias("answer_text")
    )
    return pl.DataFrame(deltas), answers


def test_instances_tails_and_report_name_the_reason(tmp_path: Path) -> None:
    prompts = _prompts(tmp_path)
    deltas, generations = _run(prompts)
    instances = build_instances(deltas, generations, prompts)

    alpaca = instances.filter(pl.col("dataset") == "alpaca_eval")
    assert alpaca.height == 10 and alpaca["base_correct"].null_count() == 10
    assert set(alpaca["correct_missing_reason"].to_list()) == {NO_GOLD_ALPACA}
    judged = instances.filter(pl.col("dataset") == "alpaca_gold")
    assert judged["base_correct"].to_list() == [True] * 10  # "It is Paris." against "Paris"
    assert judged["correct_missing_reason"].null_count() == 10

    tails = tail_statistics(instances, resamples=50).filter(
        (pl.col("family") == ALL_FAMILIES) & (pl.col("axis") == "bleu")
    )
    reason = dict(tails.select("dataset", "flip_missing_reason").iter_rows())
    assert reason["alpaca_eval"] == NO_GOLD_ALPACA
    assert reason["bare"] == GENERIC_NONE
    assert reason["alpaca_gold"] is None and reason[POOLED] is None
    flips = dict(tails.select("dataset", "flip_right_to_wrong").iter_rows())
    assert flips["alpaca_eval"] is None and flips["alpaca_gold"] == 0.0

    page = _correctness_section(prompts, generations, score_prompts(deltas))  # report's part
    assert f"alpaca_eval: 5 prompt(s), {html.escape(NO_GOLD_ALPACA)}" in page
    assert f"bare: 1 prompt(s), {html.escape(GENERIC_NONE)}" in page
    assert f"builtin_alpaca: 3 prompt(s), {html.escape(OPEN_ENDED)}" in page
    assert "alpaca_gold:" not in page  # every prompt has references


def test_a_run_written_before_the_reason_column_says_none_was_recorded(tmp_path: Path) -> None:
    prompts = _prompts(tmp_path).drop("reference_missing_reason")
    deltas, generations = _run(prompts)
    instances = build_instances(deltas, generations, prompts)
    alpaca = instances.filter(pl.col("dataset") == "alpaca_eval")
    assert set(alpaca["correct_missing_reason"].to_list()) == {NO_REASON_RECORDED}
    page = _correctness_section(prompts, generations, score_prompts(deltas))  # report's part
    assert f"alpaca_eval: 5 prompt(s), {html.escape(NO_REASON_RECORDED)}" in page
