"""Whole-answer normalised matching: yes/no references need the verdict first, numbers are
compared as numbers, other references as whole-word sequences (hand-labelled cases)."""

from __future__ import annotations

import pytest

from sago_core.statistics.correctness import is_correct, normalise_answer, numbers_in


@pytest.mark.parametrize(
    ("response", "references", "expected"),
    [
        ("No, we use all of our brain.", ["No"], True),
        ("no.", ["No"], True),
        ("There is no evidence for that.", ["No"], False),  # "no" inside decides nothing
        ("Yes and no.", ["No"], False),
        ("Not at all, no.", ["No"], False),
        ("Yes, it does.", ["Yes"], True),
        ("It has 206 bones.", ["206"], True),
        ("It has 2060 bones.", ["206"], False),
        ("About 20.6 of them.", ["206"], False),
        ("Eleven players.", ["11"], True),
        ("11.5 metres", ["11"], False),
        ("110 people", ["11"], False),
        ("About 1,000 people.", ["1000"], True),
        ("1000.0", ["1,000"], True),
        ("The answer is 1969.", ["20 July 1969", "1969"], True),
        ("On 20 June 1969.", ["20 July 1969"], False),  # the word "july" is missing
        ("It happened on July 20, 1969.", ["20 July 1969"], True),
        ("2, 3, 5, 7 and 11", ["2, 3, 5, 7, 11"], True),
        ("2, 3, 5 and 7", ["2, 3, 5, 7, 11"], False),
        ("It is located in Paris, France.", ["Paris"], True),
        ("Parisian food is great.", ["Paris"], False),
        ("The Nile.", ["The Nile"], True),
        ("The Blue Nile", ["Nile river"], False),  # the whole reference, not a word of it
        ("No idea.", [], None),
        (None, ["Paris"], None),
    ],
)
def test_matching_rules(response: str | None, references: list[str], expected: bool | None) -> None:
    assert is_correct(response, references) is expected


def test_normalisation_and_number_reading() -> None:
    assert normalise_answer("The  Eiffel-Tower!") == "eiffel tower"
    assert numbers_in("1,000 and 2.5 and twelve") == [1000.0, 2.5, 12.0]
