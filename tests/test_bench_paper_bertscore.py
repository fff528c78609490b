"""``make bench-paper``'s BERTScore ratio: sago's scorer is timed beside
bert_score's on the same pairs, without BLEU and the encoders' loads; hand-made numbers."""

from __future__ import annotations

from bench.paper import bertscore_note
from bench.paper_raw import same_scores


def test_same_scores_is_the_share_within_a_millionth() -> None:
    assert same_scores([0.5, 0.7], [0.5, 0.7000004]) == 1.0
    assert same_scores([0.5, 0.71, 0.2, 1.0], [0.5, 0.7, 0.2, 0.9]) == 0.5
    assert same_scores([], []) == 0.0


def test_the_note_prints_both_rates_the_bleu_and_the_former_measure() -> None:
    raw = {
        "bertscore": {"seconds": 1.0, "amount": 400, "load_seconds": 0.2, "identical": 0.995},
        "sago_bertscore": {"seconds": 2.0, "amount": 400, "load_seconds": 3.5, "identical": 1.0},
        "bleu_seconds": 1.25,
        "stage_less_load": 100.0,
    }
    note = bertscore_note(raw)
    assert "same 400 pairs" in note and "200.0 vs 400.0 pairs/s" in note
    assert "100.0% vs 99.5%" in note and "3.5 s vs 0.2 s" in note
    assert "BLEU over the same pairs: 1.25 s" in note
    assert note.endswith("100.0 pairs/s (0.250)")
    assert bertscore_note({**raw, "stage_less_load": None}).endswith("load): NA")
