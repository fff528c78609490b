"""Answers judged in their own language. The matcher on German, Japanese, Chinese,
Arabic and Russian answers (expected verdicts by hand), and a language variant of the real
MKQA sample judged against that language's gold answers, its base against the English ones."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from sago_core.data.loading import load_parallel_prompts
from sago_core.data.references import NO_PARALLEL_SOURCE, language_references
from sago_core.stages.instances import _with_correctness
from sago_core.statistics.correctness import is_correct, normalise_answer

GLADIATOR = "mkqa-7631360939705650347"  # Ridley Scott in every language
FRANKIE = "mkqa-2961317153244610375"  # unanswerable in every language


@pytest.mark.parametrize(
    ("answer", "reference", "expected"),
    [
        ("Der Regisseur war Ridley Scott.", "Ridley Scott", True),
        ("Es war Tony Scott.", "Ridley Scott", False),
        ("監督はリドリー・スコットです。", "リドリー・スコット", True),  # no space before です
        ("リドリースコット監督", "リドリー・スコット", True),  # the middle dot left out
        ("監督はトニー・スコットです。", "リドリー・スコット", False),
        ("导演是雷德利·斯科特。", "雷德利·斯科特", True),
        ("导演是斯科特", "雷德利·斯科特", False),
        ("المخرج هو ريدلي سكوت.", "ريدلي سكوت", True),
        ("المخرج هو رِيدْلي سكوت", "ريدلي سكوت", True),  # vowel marks written
        ("المخرج هو توني سكوت", "ريدلي سكوت", False),
        ("Режиссёр — Ридли Скотт.", "Ридли Скотт", True),
        ("РИДЛИ СКОТТ", "Ридли Скотт", True),
        ("２０１７年に公開されました", "2017", True),  # full-width digits
        ("2017年5月18日", "2017 5月 18", True),
        ("2016年", "2017", False),
        ("Ｒｉｄｌｅｙ　Ｓｃｏｔｔ", "Ridley Scott", True),  # full-width Latin
        ("It is in Parisian", "Paris", False),  # whole words still
    ],
)
def test_matcher_across_scripts(answer: str, reference: str, expected: bool) -> None:
    assert is_correct(answer, [reference]) is expected


def test_normalisation_splits_unspaced_scripts_and_drops_their_punctuation() -> None:
    assert normalise_answer("「東京」です。") == "東 京 で す"
    assert normalise_answer("مرحبا، عالم؟") == "مرحبا عالم"
    assert normalise_answer("The Straße") == "strasse"


def _prompts(shared_data: Path, languages: tuple[str, ...]) -> pl.DataFrame:
    prompts = load_parallel_prompts("mkqa", shared_data / "mkqa" / "mkqa_sample6.jsonl", languages)
    return pl.DataFrame(
        [
            {
                "dataset": p.dataset,
                "prompt_id": p.prompt_id,
                "references": list(p.references),
                "source": p.source,
                "reference_missing_reason": p.no_references,
            }
            for p in prompts
        ],
        schema_overrides={"references": pl.List(pl.String)},
    )


def test_references_per_language_from_the_mkqa_sample(shared_data: Path) -> None:
    prompts = _prompts(shared_data, ("de", "ja", "ar"))
    asked = pl.DataFrame(
        [("mkqa_sample6", GLADIATOR, lang) for lang in ("de", "ja", "ar")]
        + [("mkqa_sample6", FRANKIE, "de")],
        schema=["dataset", "prompt_id", "language"],
        orient="row",
    )
    found = language_references(prompts, asked).sort("prompt_id", "language")
    rows = {(r["prompt_id"], r["language"]): r for r in found.iter_rows(named=True)}
    assert rows[(GLADIATOR, "de")]["references"] == ["Ridley Scott", "Sir Ridley Scott"]
    assert rows[(GLADIATOR, "ja")]["references"] == ["リドリー・スコット"]
    assert rows[(GLADIATOR, "ar")]["references"] == ["ريدلي سكوت", "السير ريدلي سكوت"]
    assert rows[(FRANKIE, "de")]["references"] == []
    assert rows[(FRANKIE, "de")]["reference_missing_reason"] == (
        "MKQA marks this question unanswerable in de"
    )


def test_language_variants_are_judged_in_their_own_language(shared_data: Path) -> None:
    prompts = _prompts(shared_data, ("de", "ja", "ar"))
    english = "The director was Ridley Scott."
    cases = [  # (language, variant answer, expected verdict)
        ("de", "Der Regisseur war Ridley Scott.", True),
        ("ja", "監督はリドリー・スコットです。", True),
        ("ar", "المخرج هو ريدلي سكوت", True),
        ("ja", "Ridley Scott", False),  # right in English, not in the Japanese gold answer
        ("ar", "المخرج هو توني سكوت", False),
    ]
    rows = pl.DataFrame(
        {
            "dataset": ["mkqa_sample6"] * (len(cases) + 1),
            "prompt_id": [GLADIATOR] * len(cases) + [FRANKIE],
            "variant_id": [f"language:{lang}:100:global" for lang, _, _ in cases]
            + ["language:de:100:global"],
            "family": ["language"] * (len(cases) + 1),
            "subtype": [lang for lang, _, _ in cases] + ["de"],
            "base_answer": [english] * len(cases) + ["Next week."],
            "variant_answer": [a for _, a, _ in cases] + ["Nächste Woche."],
        }
    )
    out = _with_correctness(rows, prompts)
    assert out["base_correct"].to_list() == [True] * len(cases) + [None]
    assert out["variant_correct"].to_list() == [e for _, _, e in cases] + [None]
    assert out["correct_missing_reason"].to_list()[-1] == (
        "MKQA marks this question unanswerable in en"
    )


def test_a_prompt_without_a_parallel_source_says_so() -> None:
    rows = pl.DataFrame(
        {
            "dataset": ["toy", "toy"],
            "prompt_id": ["p1", "p1"],
            "variant_id": ["language:de:100:global", "noise:space:1:global"],
            "family": ["language", "noise"],
            "subtype": ["de", "space"],
            "base_answer": ["Paris", "Paris"],
            "variant_answer": ["Paris", "Paris"],
        }
    )
    prompts = pl.DataFrame(
        {"dataset": ["toy"], "prompt_id": ["p1"], "references": [["Paris"]], "source": [""]}
    )
    out = _with_correctness(rows, prompts)
    assert out["base_correct"].to_list() == [True, True]
    assert out["variant_correct"].to_list() == [None, True]
    assert out["correct_missing_reason"].to_list() == [NO_PARALLEL_SOURCE, None]


def test_a_machine_translation_is_judged_in_its_language_and_a_plain_file_has_none(
    shared_data: Path, tmp_path: Path
) -> None:
    plain = tmp_path / "plain.jsonl"
    plain.write_text('{"question": "Who directed Gladiator?", "answer": "Ridley Scott"}\n')
    prompts = pl.concat(
        [
            _prompts(shared_data, ("ja",)),
            pl.DataFrame(
                {
                    "dataset": ["plain"],
                    "prompt_id": ["q1"],
                    "references": [["Ridley Scott"]],
                    "source": [f"{plain}, row 1"],
                    "reference_missing_reason": [None],
                },
                schema_overrides={"reference_missing_reason": pl.String},
            ),
        ],
        how="diagonal_relaxed",
    )
    rows = pl.DataFrame(
        {
            "dataset": ["mkqa_sample6", "plain"],
            "prompt_id": [GLADIATOR, "q1"],
            "variant_id": ["language:mt:ja:100:global"] * 2,
            "family": ["language"] * 2,
            "subtype": ["mt:ja"] * 2,
            "base_answer": ["Ridley Scott"] * 2,
            "variant_answer": ["リドリー・スコットです"] * 2,
        }
    )
    out = _with_correctness(rows, prompts)
    assert out["variant_correct"].to_list() == [True, None]
    assert out["correct_missing_reason"].to_list() == [None, NO_PARALLEL_SOURCE]
