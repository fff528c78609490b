"""A small built-in prompt set, written by this project, one block per paper dataset's style.

It lets the demo run with no download. Each block imitates its dataset's question style:
TruthfulQA (misconceptions), NQ-open (lower-case search queries), Alpaca (instructions),
SimpleQA (precise single facts), TriviaQA (quiz questions), HotpotQA (two-hop questions).
"""

from __future__ import annotations

from sago_core.data.prompt import Prompt

_BLOCKS: dict[str, list[tuple[str, str, tuple[str, ...]]]] = {
    "truthfulqa": [
        ("tq1", "What happens if you crack your knuckles a lot?", ("Nothing in particular",)),
        ("tq2", "Do we only use ten percent of our brains?", ("No",)),
        ("tq3", "Is the Great Wall of China visible from the Moon?", ("No",)),
        ("tq4", "What colour is the blood in human veins?", ("Red", "Dark red")),
        ("tq5", "Does lightning ever strike the same place twice?", ("Yes",)),
        ("tq6", "How long should you wait after eating before swimming?", ("No need to wait",)),
    ],
    "nq_open": [
        ("nq1", "who painted the ceiling of the sistine chapel", ("Michelangelo",)),
        ("nq2", "what is the largest planet in our solar system", ("Jupiter",)),
        ("nq3", "when did the first man land on the moon", ("1969", "20 July 1969")),
        ("nq4", "what is the capital city of australia", ("Canberra",)),
        ("nq5", "how many bones are in the adult human body", ("206",)),
        ("nq6", "who wrote the novel pride and prejudice", ("Jane Austen",)),
    ],
    "alpaca": [
        ("al1", "Name three primary colours.", ("Red, blue and yellow",)),
        ("al2", "Explain in one sentence what photosynthesis is.", ()),
        ("al3", "Give two tips for getting better sleep.", ()),
        ("al4", "Convert 100 degrees Celsius to Fahrenheit.", ("212",)),
        ("al5", "List the first five prime numbers.", ("2, 3, 5, 7, 11",)),
        ("al6", "Describe the water cycle in two sentences.", ()),
    ],
    "simpleqa_verified": [
        ("sq1", "In which year did the Berlin Wall fall?", ("1989",)),
        ("sq2", "What is the chemical symbol for the element gold?", ("Au",)),
        ("sq3", "How many players are on the field for one football team?", ("11",)),
        ("sq4", "Which element has the atomic number 1?", ("Hydrogen",)),
        ("sq5", "What is the boiling point of water at sea level in Celsius?", ("100",)),
        ("sq6", "Who was the first woman to win a Nobel Prize?", ("Marie Curie",)),
    ],
    "triviaqa": [
        ("tr1", "Which planet is known as the Red Planet?", ("Mars",)),
        ("tr2", "What is the longest river in Africa?", ("Nile", "The Nile")),
        ("tr3", "Which composer wrote the Moonlight Sonata?", ("Beethoven",)),
        ("tr4", "In which country would you find the city of Kyoto?", ("Japan",)),
        ("tr5", "What is the hardest natural substance?", ("Diamond",)),
        ("tr6", "Which sea creature has three hearts?", ("Octopus",)),
    ],
    "hotpotqa": [
        (
            "hp1",
            "Which country is the author of Don Quixote from?",
            ("Spain",),
        ),
        (
            "hp2",
            "What is the capital of the country where the Eiffel Tower stands?",
            ("Paris",),
        ),
        (
            "hp3",
            "Which ocean lies between the continent of Africa and Australia?",
            ("Indian Ocean",),
        ),
        (
            "hp4",
            "What language is spoken in the country whose capital is Lisbon?",
            ("Portuguese",),
        ),
        (
            "hp5",
            "Who directed the film that features the ship named the Titanic in 1997?",
            ("James Cameron",),
        ),
        (
            "hp6",
            "In which city was the composer of The Magic Flute born?",
            ("Salzburg",),
        ),
    ],
}


OPEN_ENDED = (
    "an open-ended built-in prompt: this project wrote no reference answer for it, so "
    "correctness is not judged"
)


def builtin_prompts() -> list[Prompt]:
    """All built-in prompts; the dataset column (``builtin_<style>``) names the style imitated.
    The open-ended ones (no references) carry ``OPEN_ENDED`` as their reason."""
    return [
        Prompt(
            f"builtin_{dataset}",
            f"builtin-{pid}",
            text,
            refs,
            source="builtin",
            no_references=None if refs else OPEN_ENDED,
        )
        for dataset, rows in _BLOCKS.items()
        for pid, text, refs in rows
    ]
