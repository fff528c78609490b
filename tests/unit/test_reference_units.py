"""One prompt is one unit when scoring the SAGO reference code's CSVs.

The reference code asks the base prompt again on every row, so a prompt of its Gemini
TriviaQA punctuation results has seven base answers (six ``response_orig``, one
``response_pert`` at strength 0). They are base samples of that one prompt: sample 0 is the
base row, the others replays of it, so n is the number of prompts and every prompt has its
noise floor. The score path here is the real one (pairs with sacrebleu's BLEU, mirroring,
deltas, per-prompt scores, summary) without Prefect; BERTScore is a stand-in, not asserted.
"""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from sago_core.external.frames import model_generations, rows_frame, unmeasured_analysis
from sago_core.external.options import ExternalSource
from sago_core.external.read import ExternalTable, read_external
from sago_core.external.reference import BASE_ANSWERS, SEVERAL_BASES
from sago_core.scoring.deltas import compute_deltas
from sago_core.scoring.prompt_scores import score_prompts
from sago_core.scoring.summary import summarize
from sago_core.stages.pairs import detect_mirroring_frame, score_pairs
from sago_core.vocabulary import BASE_VARIANT_ID, POOLED, REPLAY_FAMILY

RESULTS = Path(__file__).resolve().parents[1] / "fixtures" / "reference" / "closed_models"
PUNCTUATION = RESULTS / "run_gemini_2_5_flash_trivia_qa_punctuation_20260501_031700"
FILE = PUNCTUATION / "full_results_all_models.csv"
# the family given explicitly, so each test fails on the unit alone
SOURCE = ExternalSource(path=FILE, family="noise", subtype="punctuation")


def _file_rows() -> list[dict[str, str]]:
    with FILE.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def _summary(table: ExternalTable) -> pl.DataFrame:
    frame = rows_frame(table.rows, FILE.name, "0" * 64)
    generations = model_generations(frame, "gemini-2.5-flash", None, None)
    pairs = score_pairs(
        generations, lambda h, r: [float(a == b) for a, b in zip(h, r, strict=True)]
    )
    deltas = compute_deltas(
        generations,
        unmeasured_analysis(generations),
        pairs,
        detect_mirroring_frame(generations),
    )
    return summarize(score_prompts(deltas))


def test_a_prompt_is_one_unit_and_n_is_the_number_of_prompts() -> None:
    table = read_external(SOURCE)
    prompts = {r["prompt_id"] for r in _file_rows()}
    assert len(prompts) == 16
    assert {r.prompt_id for r in table.rows} == prompts  # no "0~1", "0~2" any more
    bleu = _summary(table).filter((pl.col("axis") == "bleu") & (pl.col("dataset") == POOLED))
    assert bleu["n"].to_list() == [16]
    assert bleu["floor"].to_list()[0] is not None and bleu["p_floor"].to_list()[0] is not None


def test_every_base_answer_is_a_base_sample_of_its_prompt() -> None:
    rows = _file_rows()
    table = read_external(SOURCE)
    assert table.notes[BASE_ANSWERS] == 7
    answers: dict[str, set[str]] = {}
    for r in rows:
        answers.setdefault(r["prompt_id"], set()).add(r["response_orig"])
        if r["strength"] == "0":
            answers[r["prompt_id"]].add(r["response_pert"])
    assert table.notes[SEVERAL_BASES] == sum(len(a) > 1 for a in answers.values())
    for prompt in ("0", "7"):
        mine = [r for r in rows if r["prompt_id"] == prompt]
        expected = Counter(r["response_orig"] for r in mine)
        expected.update(r["response_pert"] for r in mine if r["strength"] == "0")
        base = [r for r in table.rows if r.prompt_id == prompt and r.is_base]
        replays = [
            r
            for r in table.rows
            if r.prompt_id == prompt and r.variant is not None and r.variant.family == REPLAY_FAMILY
        ]
        assert len(base) == 1 and base[0].response_text == mine[0]["response_orig"]
        assert Counter([base[0].response_text, *(r.response_text for r in replays)]) == expected
        assert {r.variant_id for r in replays} == {f"replay:base:{k}:global" for k in range(1, 7)}
        variants = {
            r.variant_id: r.response_text
            for r in table.rows
            if r.prompt_id == prompt and r.variant is not None and r.variant.family == "noise"
        }
        assert variants == {
            f"noise:punctuation:{r['strength']}:global": r["response_pert"]
            for r in mine
            if r["strength"] != "0"
        }
    assert sum(r.variant_id == BASE_VARIANT_ID for r in table.rows) == 16


def _excerpt(tmp_path: Path, prompts: int) -> Path:
    """The file's first ``prompts`` prompts, every row of each, as the reference wrote them."""
    rows = _file_rows()
    keep = list(dict.fromkeys(r["prompt_id"] for r in rows))[:prompts]
    path = tmp_path / FILE.name
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(r for r in rows if r["prompt_id"] in keep)
    return path


def test_each_variant_is_compared_with_the_base_answer_asked_on_its_own_row(
    tmp_path: Path,
) -> None:
    """The reference computes each row's delta against the base answer asked on that row:
    sago's per-row BLEU deltas are sacrebleu's sentence BLEU of the row's own pair minus 100
    (computed here with sacrebleu itself); only the aggregation (one unit per prompt) is
    sago's, so n is the number of prompts."""
    import sacrebleu

    excerpt = _excerpt(tmp_path, 4)
    rows = [r for r in _file_rows() if r["prompt_id"] in {"0", "1", "2", "3"}]
    variants = [r for r in rows if r["strength"] != "0"]
    table = read_external(ExternalSource(path=excerpt, family="noise", subtype="punctuation"))
    frame = rows_frame(table.rows, excerpt.name, "0" * 64)
    generations = model_generations(frame, "gemini-2.5-flash", None, None)
    pairs = score_pairs(generations, lambda h, r: [0.0] * len(h))
    deltas = compute_deltas(
        generations, unmeasured_analysis(generations), pairs, detect_mirroring_frame(generations)
    )
    bleu_rows = deltas.filter(pl.col("axis") == "bleu").iter_rows(named=True)
    got = {(r["prompt_id"], r["variant_id"]): r["delta"] for r in bleu_rows}

    def bleu_delta(answer: str, base: str) -> float:
        return float(sacrebleu.sentence_bleu(answer, [base]).score) - 100.0

    own = {
        (r["prompt_id"], f"noise:punctuation:{r['strength']}:global"): bleu_delta(
            r["response_pert"], r["response_orig"]
        )
        for r in variants
    }
    assert len(own) == len(variants) == 20
    for key, expected in own.items():
        assert got[key] == pytest.approx(expected, abs=1e-9), key
    # the pairing matters here: against each prompt's first base answer, as every variant
    # was compared before, several rows get another delta
    first_base = {r["prompt_id"]: r["response_orig"] for r in reversed(rows)}
    first = [bleu_delta(r["response_pert"], first_base[r["prompt_id"]]) for r in variants]
    assert sum(abs(a - b) > 1 for a, b in zip(first, own.values(), strict=True)) >= 3
    summary = summarize(score_prompts(deltas))
    bleu = summary.filter((pl.col("axis") == "bleu") & (pl.col("dataset") == POOLED))
    assert bleu["n"].to_list() == [4]
