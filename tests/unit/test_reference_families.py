"""The SAGO reference code's families as published: the mood family's
strengths are labels, the length family's baseline (1.0, an unchanged prompt) is the base
asked again, and its folder and family slugs name sago's families without --family."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from sago_core.errors import InputError
from sago_core.external.options import ExternalSource
from sago_core.external.read import read_external
from sago_core.external.reference_layout import parse_run_folder
from sago_core.vocabulary import REPLAY_FAMILY

RESULTS = Path(__file__).resolve().parents[1] / "fixtures" / "reference" / "closed_models"
MOOD = RESULTS / "run_gemini_2_5_flash_trivia_qa_inter_vs_imper_20260501_030139"
LENGTH = RESULTS / "run_gemini_2_5_flash_trivia_qa_length_variation_20260501_025147"
FILE = "full_results_all_models.csv"


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def _write(path: Path, rows: list[dict[str, str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_mood_labels_are_read_as_the_mood_asked_for() -> None:
    table = read_external(ExternalSource(path=MOOD / FILE, family="structural", subtype="mood"))
    by_label = {(r["prompt_id"], r["strength"]): r["prompt_pert"] for r in _rows(MOOD / FILE)}
    texts = {(r.prompt_id, r.variant_id): r.prompt_text for r in table.rows}
    for prompt in ("0", "1", "2"):  # TriviaQA questions: the imperative changes the mood
        assert texts[(prompt, "structural:mood:1:global")] == by_label[(prompt, "imperative")]
        assert texts[(prompt, "structural:mood:0:global")] == by_label[(prompt, "interrogative")]


def test_an_instruction_asked_as_a_question_is_the_mood_change(tmp_path: Path) -> None:
    rows = _rows(MOOD / FILE)[:1]
    rows[0] |= {
        "prompt_orig": "Name the longest river in South America.",
        "strength": "interrogative",
    }
    file = _write(tmp_path / MOOD.name / FILE, rows)
    source = ExternalSource(path=file, family="structural", subtype="mood")
    (row,) = [r for r in read_external(source).rows if r.variant is not None]
    assert row.variant_id == "structural:mood:1:global"


def test_an_unknown_mood_label_names_row_column_and_the_labels(tmp_path: Path) -> None:
    rows = _rows(MOOD / FILE)
    rows[2]["strength"] = "declarative"
    file = _write(tmp_path / MOOD.name / FILE, rows)
    with pytest.raises(InputError, match="'declarative' is not a number nor a mood label") as err:
        read_external(ExternalSource(path=file, family="structural", subtype="mood"))
    assert (err.value.row, err.value.column) == (3, "strength")
    assert "interrogative, imperative" in str(err.value)


def test_the_length_baseline_is_the_base_asked_again_not_a_variant() -> None:
    rows = _rows(LENGTH / FILE)
    table = read_external(ExternalSource(path=LENGTH / FILE, family="structural", subtype="length"))
    lengths = {
        r.variant.strength for r in table.rows if r.variant and r.variant.subtype == "length"
    }
    assert lengths == {0.25, 0.5, 1.5, 2.0, 3.0}
    assert not any(r.variant_id.startswith("structural:length:1:") for r in table.rows)
    for prompt in ("0", "1", "2"):
        (baseline,) = [r for r in rows if r["prompt_id"] == prompt and r["strength"] == "1.0"]
        assert baseline["prompt_pert"] == baseline["prompt_orig"]  # an unchanged prompt
        samples = [
            r.response_text
            for r in table.rows
            if r.prompt_id == prompt
            and (r.is_base or (r.variant is not None and r.variant.family == REPLAY_FAMILY))
        ]
        # the base asked on all six rows, and once more as the 1.0 "variant"
        assert len(samples) == 7
        assert baseline["response_pert"] in samples


@pytest.mark.parametrize(
    ("folder", "family", "subtype", "dataset"),
    [
        (
            "gemini_2_5_flash_trivia_qa_punctuation_20260501_031700",
            "noise",
            "punctuation",
            "trivia_qa",
        ),
        ("claude_sonnet_4_6_alpaca_spacing_20260425_203027", "noise", "spacing", "alpaca"),
        (
            "claude_sonnet_4_6_trivia_qa_letter_case_20260501_033725",
            "noise",
            "capitalization",
            "trivia_qa",
        ),
        (
            "claude_sonnet_4_6_trivia_qa_politeness_20260501_034947",
            "register",
            "politeness",
            "trivia_qa",
        ),
        (
            "gemini_2_5_flash_trivia_qa_length_variation_20260501_025147",
            "structural",
            "length",
            "trivia_qa",
        ),
        (
            "gemini_2_5_flash_trivia_qa_inter_vs_imper_20260501_030139",
            "structural",
            "mood",
            "trivia_qa",
        ),
    ],
)
def test_run_folder_slugs_name_sagos_family_without_options(
    folder: str, family: str, subtype: str, dataset: str
) -> None:
    folder = f"run_{folder}"
    table = read_external(ExternalSource(path=RESULTS / folder / FILE))
    variants = {(r.variant.family, r.variant.subtype) for r in table.rows if r.variant}
    assert variants == {(family, subtype), (REPLAY_FAMILY, "base")}
    assert {r.dataset for r in table.rows} == {dataset}
    assert {r.model for r in table.rows} == {_rows(RESULTS / folder / FILE)[0]["model"]}


def test_run_folder_names_of_both_layouts() -> None:
    closed = parse_run_folder(
        "run_gemini_2_5_flash_natural_questions_inter_vs_imper_20260501_032921"
    )
    assert closed is not None
    assert (closed.family_slug, closed.dataset, closed.stamp) == (
        "inter_vs_imper",
        "natural_questions",
        "20260501_032921",
    )
    opened = parse_run_folder("run_multi_truthful_qa_20260223_221345", "spacing")
    assert opened is not None and (opened.family_slug, opened.dataset) == ("spacing", "truthful_qa")
    assert parse_run_folder("results") is None


def test_the_aggregated_csv_labels_name_family_and_dataset(tmp_path: Path) -> None:
    """The reference's aggregated_closed_models.csv: style and dataset as display labels."""
    rows = [
        {"style": "Punct.", "dataset": "TriviaQA", "run_path": f"results/closed_models/{r}", **row}
        for r in ("run_gemini_2_5_flash_trivia_qa_punctuation_20260501_031700",)
        for row in _rows(RESULTS / r / FILE)
    ]
    table = read_external(ExternalSource(path=_write(tmp_path / "aggregated.csv", rows)))
    assert {r.dataset for r in table.rows} == {"trivia_qa"}
    assert {r.variant.family for r in table.rows if r.variant} == {"noise", REPLAY_FAMILY}
