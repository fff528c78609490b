"""Answer correctness against reference answers: whole-answer normalised matching.

Normalisation (SQuAD's evaluation, widened to every script as MKQA's evaluation does):
Unicode NFKC (full-width forms and ligatures to their plain forms), case-folded, Arabic
vowel marks and tatweel dropped, punctuation of any script dropped (``、。「」・،؟`` as well as
ASCII), the English articles a/an/the dropped, whitespace collapsed. Scripts written
without spaces between words (Han, kana, Thai, Lao, Khmer, Myanmar) are split into one word
per character, so a Japanese or Chinese reference is found inside an answer that runs it
into the next word ("リドリー・スコットです" holds "リドリー・スコット"); other scripts keep their
whitespace words. A response is correct when it matches any reference under the
rule for that reference's kind (prompts without references, or without an answer, are
unknown, None, never counted as wrong). References are gold answers only: a dataset whose
answer column is another model's output (Alpaca, AlpacaEval) gives its prompts none, so
correctness there is unknown unless the user names a gold column
(``sago_core.data.references`` says, per dataset, where its references come from):

- **yes/no** (the normalised reference is ``yes`` or ``no``): the response's first word must
  be that verdict ("No, we use all of it" matches "No"; "There is no evidence" does not, nor
  does "Yes and no" for "No"). A verdict word inside the answer decides nothing.
- **numbers** (the reference holds a digit): every number of the reference must be among
  the response's numbers, compared as numbers on the raw text ("1,000" = "1000" = "1000.0";
  "11.5" and "110" are not 11; signs are ignored), and every other word of the reference must
  occur in the response as a word ("20 July 1969" needs 20, 1969 and "july"). The words zero
  to twenty count as numbers in the response ("eleven" = 11).
- **everything else**: the whole normalised reference must occur in the normalised response
  as a whole-word sequence ("Paris" matches "It is in Paris, France", not "Parisian").
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Sequence
from functools import cache

_ASCII_PUNCTUATION = frozenset(string.punctuation)
# Arabic harakat, superscript alef and tatweel: written or not, the word is the same
_ARABIC_MARKS = re.compile("[\u064b-\u065f\u0670\u0640]")
# scripts without spaces between words: kana, Han (with its extensions), Thai, Lao,
# Myanmar, Khmer
_UNSPACED = (
    "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
    "\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\U00020000-\U0002fa1f"
)
_WORD = re.compile(f"[{_UNSPACED}]|[^\\s{_UNSPACED}]+")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_NUMBER = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?!\w)|\d+(?:\.\d+)?")
_VERDICTS = frozenset({"yes", "no"})
_NUMBER_WORDS = {
    word: value
    for value, word in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
            "twenty",
        ]
    )
}


@cache  # called once per character of every answer and reference; few distinct ones
def _is_punctuation(char: str) -> bool:
    return char in _ASCII_PUNCTUATION or unicodedata.category(char).startswith("P")


def normalise_answer(text: str) -> str:
    """The comparable form of an answer or a reference (module doc): its words, one space
    apart, one word per character in scripts written without spaces."""
    text = _ARABIC_MARKS.sub("", unicodedata.normalize("NFKC", text).casefold())
    text = "".join(" " if _is_punctuation(char) else char for char in text)
    return " ".join(_WORD.findall(_ARTICLES.sub(" ", text)))


def numbers_in(text: str) -> list[float]:
    """Every number in the raw text (thousands separators and decimals read; digits of any
    script, full-width ones included), then the number words zero..twenty among its
    normalised words."""
    text = unicodedata.normalize("NFKC", text)
    values = [float(m.group().replace(",", "")) for m in _NUMBER.finditer(text)]
    values += [
        float(_NUMBER_WORDS[w]) for w in normalise_answer(text).split() if w in _NUMBER_WORDS
    ]
    return values


def _is_number_reference(reference: str) -> bool:
    return bool(_NUMBER.search(reference))


def _matches(response: str, reference: str) -> bool:
    target = normalise_answer(reference)
    answer = normalise_answer(response)
    if target in _VERDICTS:
        words = answer.split()
        return bool(words) and words[0] == target
    if _is_number_reference(reference):
        found = set(numbers_in(response))
        present = set(answer.split())
        plain = unicodedata.normalize("NFKC", reference)
        others = normalise_answer(_NUMBER.sub(" ", plain)).split()
        wanted = {float(m.group().replace(",", "")) for m in _NUMBER.finditer(plain)}
        return wanted <= found and all(w in present for w in others)
    return f" {target} " in f" {answer} "


def is_correct(response: str | None, references: Sequence[str]) -> bool | None:
    """None (unknown) without references or without an answer (a failed request, or a
    reasoning block that never closed)."""
    targets = [r for r in references if normalise_answer(r)]
    if not targets or response is None:
        return None
    return any(_matches(response, target) for target in targets)
