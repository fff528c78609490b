"""Checks a structural rewrite must pass beyond similarity.

A small rewriter asked to reshape a question often answers it instead, and an answer
restating the question's words scores high on BERTScore, so the semantic filter keeps it.
Three checks catch what similarity cannot (docs/guide/datasets-and-variants.md, "Checks a
rewrite passes beyond similarity"): a real change (not only casing, punctuation and
spacing), no answer (none of the prompt's reference answers the prompt does not hold), and,
for a prompt that reads as English (``reads_as_english``) whose form the closed word lists
recognise, the request's form (a rewrite that only states something has lost the ask).
Every other prompt (another language, a prompt ending in its input text, a cloze query)
passes the form check untouched.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache
from typing import Any, Literal

Form = Literal["question", "command", "statement"]


def _wordset(words: str) -> frozenset[str]:
    return frozenset(words.split())


QUESTION_WORDS = _wordset("who whom whose what which when where why how")
AUXILIARIES = _wordset(
    "is are was were am do does did can could will would shall should may might must has "
    "have had isn't aren't wasn't weren't don't doesn't didn't can't couldn't won't wouldn't "
    "shouldn't hasn't haven't"
)
# Imperatives a prompt opens with (Alpaca's instructions, the mood variant's commands).
IMPERATIVES = _wordset(
    "add analyse analyze answer arrange assess calculate categorize categorise change check "
    "choose cite clarify classify compare compile compose compute construct convert count "
    "create define demonstrate describe design detail determine develop discuss draft edit "
    "elaborate enumerate estimate evaluate explain express find formulate generate give "
    "guess identify illustrate imagine indicate inform list locate make mention name note "
    "outline paraphrase pick point predict prepare present produce propose provide rank "
    "recall recommend reformulate rephrase report restate reveal rewrite say select share "
    "show specify state suggest summarize summarise supply tell translate write"
)
# A request phrased as a sentence about the asker ("I would like to know who ...").
_REQUEST = re.compile(
    r"^(?:(?:i|we)(?:\s+would|'d)?\s+(?:like|want|wish|need|love)\s+to\s+"
    r"(?:know|learn|find out|hear|understand|see)"
    r"|(?:i|we)\s+wonder|(?:i am|i'm|we are|we're)\s+(?:curious|wondering|asking)"
    r"|let\s+(?:me|us)\s+know)\b"
)
_POLITE = re.compile(r"^(?:please|kindly|now|just|so|then|and)\s+")
_SENTENCE = re.compile(r"(?<=[.?!])\s+")
_WORD = re.compile(r"[\w']+")
_WORD_ANY = re.compile(r"\w+")
# References that are everyday words: containing one says nothing about answering.
_EVERYDAY = _wordset("yes no true false none nothing")
MIN_REFERENCE_CHARS = 3
MIN_ENGLISH_CONFIDENCE = 0.5


def _normalise(text: str) -> str:
    """Casefolded, without punctuation, symbols or spacing: what is left is the wording."""
    kept = (
        ch
        for ch in unicodedata.normalize("NFKC", text).casefold()
        if unicodedata.category(ch)[0] not in "PSZ"
    )
    return "".join(kept)


def only_surface_change(prompt: str, rewrite: str) -> bool:
    """Whether ``rewrite`` differs from ``prompt`` only in casing, punctuation and spacing."""
    return _normalise(prompt) == _normalise(rewrite)


def sentence_form(sentence: str) -> Form:
    """A question, a command (or a request about the asker), or a statement."""
    text = sentence.strip().strip("\"'“”‘’()[]").strip()
    if text.endswith("?"):
        return "question"
    lower = _POLITE.sub("", text.lower())
    words = _WORD.findall(lower)
    if not words:
        return "statement"
    if words[0] in QUESTION_WORDS or words[0] in AUXILIARIES:
        return "question"
    if words[0] in IMPERATIVES or _REQUEST.match(lower):
        return "command"
    return "statement"


def _about_the_asker(sentence: str) -> bool:
    return bool(_REQUEST.match(_POLITE.sub("", sentence.strip().lower())))


def request_form(text: str) -> Form:
    """The form of a prompt or rewrite: its last sentence's, where a prompt that opens with
    context puts its ask ("The Moonlight Sonata is famous. Who wrote it?"); a closing
    sentence about the asker ("... I am curious.") leaves the form of the one before."""
    sentences = [s for s in _SENTENCE.split(text.strip()) if s.strip()]
    while len(sentences) > 1 and _about_the_asker(sentences[-1]):
        sentences.pop()
    return sentence_form(sentences[-1]) if sentences else "statement"


def asks_before_statement(text: str) -> bool:
    """Whether the text asks first and then states something: a question followed by an
    answer-like sentence ("Who wrote it? Beethoven.")."""
    forms = [sentence_form(s) for s in _SENTENCE.split(text.strip()) if s.strip()]
    return forms[-1:] == ["statement"] and any(f != "statement" for f in forms[:-1])


@cache
def language_identifier() -> Any:
    """py3langid's model, loaded once per process (these checks and the language axis)."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def reads_as_english(text: str) -> bool:
    """Whether the form checks' English word lists may judge ``text``: py3langid reads it as
    English with confidence 0.5 or more, or it opens with a word of those lists and English is
    among py3langid's three likeliest languages (a short command such as "Convert 100 degrees
    Celsius to Fahrenheit." reads as German at 0.13; "Was ist ...?" opens with an English
    auxiliary but English is not among its three)."""
    identifier = language_identifier()
    label, confidence = identifier.classify(text)
    if str(label) == "en" and float(confidence) >= MIN_ENGLISH_CONFIDENCE:
        return True
    words = _WORD.findall(_POLITE.sub("", text.strip().lower()))
    opener = bool(words) and words[0] in QUESTION_WORDS | AUXILIARIES | IMPERATIVES
    likeliest = [str(code) for code, _ in identifier.rank(text)[:3]]
    return opener and "en" in likeliest


def english_form(prompt: str) -> Form | None:
    """The prompt's form where the English checks can judge it: an English question or
    command (None: another language, or a form the word lists do not recognise)."""
    form = request_form(prompt)
    if form == "statement" or not reads_as_english(prompt):
        return None
    return form


def leaked_reference(prompt: str, rewrite: str, references: tuple[str, ...]) -> str | None:
    """A reference answer the rewrite holds and the prompt does not (whole words)."""
    base = f" {' '.join(_WORD_ANY.findall(prompt.casefold()))} "
    said = f" {' '.join(_WORD_ANY.findall(rewrite.casefold()))} "
    for reference in references:
        words = _WORD_ANY.findall(reference.casefold())
        phrase = " ".join(words)
        if len(phrase) < MIN_REFERENCE_CHARS or phrase in _EVERYDAY:
            continue
        if f" {phrase} " in said and f" {phrase} " not in base:
            return reference
    return None


def expected_form(subtype: str, prompt_form: Form, prompt_is_question: bool) -> Form:
    """The form a rewrite of the given subtype must have: a mood variant turns what the
    instruction called a question into a command and anything else into a question; a
    length variant keeps the prompt's form."""
    if subtype == "mood":
        return "command" if prompt_is_question else "question"
    return prompt_form


def form_problem(prompt: str, rewrite: str, subtype: str, prompt_is_question: bool) -> str | None:
    """Why the rewrite does not keep the request's form (English prompts only), or None."""
    form = english_form(prompt)
    if form is None:
        return None
    if asks_before_statement(rewrite):
        return "rewrite states something after its request (an answer?)"
    got = request_form(rewrite)
    want = expected_form(subtype, form, prompt_is_question)
    if got == want:
        return None
    if got == "statement":
        return f"rewrite is a statement, not a {want}: it asserts (or answers) instead of asking"
    return f"rewrite is a {got}, not the {want} a {subtype} variant of this prompt keeps"


def rewrite_problem(
    prompt: str,
    rewrite: str,
    subtype: str,
    prompt_is_question: bool,
    references: tuple[str, ...] = (),
) -> str | None:
    """Why a rewrite is not a variant of its prompt beyond similarity, or None."""
    if only_surface_change(prompt, rewrite):
        return "rewrite differs from the prompt only in casing and punctuation"
    leaked = leaked_reference(prompt, rewrite, references)
    if leaked is not None:
        return f"rewrite contains the reference answer {leaked!r}: it answers the prompt"
    return form_problem(prompt, rewrite, subtype, prompt_is_question)
