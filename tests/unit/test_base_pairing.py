"""Each variant is shown and scored beside one base answer: its prompt's base row's, or, in a
scored file that pairs them (``paired_base``), the base sample its own row names. The pair
scores, instances.parquet and the cross-language pairs an English-only encoder skips all
take that pairing from axes/base_pairing.py."""

from __future__ import annotations

import csv
from pathlib import Path

import polars as pl

from sago_core.artifacts.schemas import PAIRED_BASE
from sago_core.axes.base_pairing import beside_base
from sago_core.axes.text_similarity import cross_language_texts
from sago_core.external.frames import (
    model_generations,
    prompts_frame,
    rows_frame,
    unmeasured_analysis,
)
from sago_core.external.options import ExternalSource
from sago_core.external.read import read_external
from sago_core.scoring.deltas import compute_deltas
from sago_core.stages.instances import build_instances
from sago_core.stages.pairs import detect_mirroring_frame, score_pairs

RESULTS = Path(__file__).resolve().parents[1] / "fixtures" / "reference" / "closed_models"
FILE = (
    RESULTS
    / "run_gemini_2_5_flash_trivia_qa_punctuation_20260501_031700"
    / ("full_results_all_models.csv")
)
PROMPTS = ("0", "1", "2", "3")
REPLAY = "replay:base:1:global"


def _generations(rows: list[dict[str, object]]) -> pl.DataFrame:
    base = {"model": "m", "dataset": "d", "prompt_id": "p", "subtype": "s", "strength": 1.0}
    return pl.DataFrame([base | {"position": "global", "prompt_text": "q"} | r for r in rows])


def test_a_variant_is_beside_the_base_sample_its_row_names_else_the_base_row() -> None:
    generations = _generations(
        [
            {"variant_id": "base", "family": "base", "response_text": "A", PAIRED_BASE: None},
            {"variant_id": REPLAY, "family": "replay", "response_text": "B", PAIRED_BASE: None},
            {"variant_id": "v1", "family": "noise", "response_text": "X", PAIRED_BASE: REPLAY},
            {"variant_id": "v2", "family": "noise", "response_text": "Y", PAIRED_BASE: None},
        ]
    )
    rows = beside_base(generations).sort("variant_id")
    assert rows["variant_id"].to_list() == [REPLAY, "v1", "v2"]
    assert rows["base_answer"].to_list() == ["A", "B", "A"]


def test_a_cross_language_pair_is_the_variant_beside_its_paired_base() -> None:
    generations = _generations(
        [
            {"variant_id": "base", "family": "base", "response_text": "A", PAIRED_BASE: None},
            {"variant_id": REPLAY, "family": "replay", "response_text": "B", PAIRED_BASE: None},
            {"variant_id": "de", "family": "language", "response_text": "X", PAIRED_BASE: REPLAY},
        ]
    )
    assert cross_language_texts(generations) == {("X", "B")}


def test_instances_show_the_base_answer_asked_on_the_variants_own_row(tmp_path: Path) -> None:
    """The reference code asks the base prompt again on every row and computes that row's
    delta against it: instances.parquet shows that same base answer, not sample 0's."""
    with FILE.open(encoding="utf-8", newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if r["prompt_id"] in PROMPTS]
    excerpt = tmp_path / FILE.name
    with excerpt.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    table = read_external(ExternalSource(path=excerpt, family="noise", subtype="punctuation"))
    frame = rows_frame(table.rows, excerpt.name, "0" * 64)
    generations = model_generations(frame, "gemini-2.5-flash", None, None)
    pairs = score_pairs(generations, lambda h, r: [0.0] * len(h))
    deltas = compute_deltas(
        generations, unmeasured_analysis(generations), pairs, detect_mirroring_frame(generations)
    )
    instances = build_instances(deltas, generations, prompts_frame(frame))
    shown = {
        (r["prompt_id"], r["variant_id"]): r["base_answer"] for r in instances.iter_rows(named=True)
    }
    own = {
        (r["prompt_id"], f"noise:punctuation:{r['strength']}:global"): r["response_orig"]
        for r in rows
        if r["strength"] != "0"
    }
    assert len(own) == 20 and shown == own
    # the pairing matters here: several rows' own base answer is not the prompt's first
    first = {r["prompt_id"]: r["response_orig"] for r in reversed(rows)}
    assert sum(answer != first[prompt] for (prompt, _), answer in own.items()) >= 3
