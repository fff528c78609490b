"""Rule-based structural rewrites of English prompts: mood and length without a model.

A small rewriter model asked to reshape a question most often answers it or leaves its form
(the embedded 135M model kept none of its demo rewrites), so the structural family also has
deterministic rules. They handle one-sentence English questions and commands whose form the
request-form word lists recognise (``rewrite_checks``), and refuse everything else with a
reason, so that another language never gets an English rewrite: such a prompt is left to a
rewriter model, or recorded as not rewritten.

- **mood**, question -> command: "What is the capital of France?" -> "Tell me the capital of
  France."; "How long should you wait?" -> "Tell me how long you should wait."; "Do we use
  ...?" -> "Tell me whether we use ...". Only word orders the rules can undo without a
  parser are handled (a pronoun subject, a wh-word that is the subject); a question whose
  verb would need inflecting ("When did the war end?" -> "... the war ended") is refused.
  Command -> question: "List the first five prime numbers." -> "Can you list the first
  five prime numbers?".
- **length**, shorter: politeness and filler words dropped, contractions, and "What is the
  X?" as the bare "X?"; longer: neutral lead-in sentences before the prompt (no politeness,
  which is the register family's, and nothing about the answer). Of the candidates that
  pass the structural checks, the one whose word count is nearest the target (round(words x
  m)) is used, and only if its word ratio is nearer m than 1: a rewrite the rules cannot
  bring near the asked strength is refused rather than recorded under it.

Every rewrite returned passed ``check_rewrite``, the same checks a model's rewrite must pass;
the semantic filter judges its meaning afterwards, as for any structural variant.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sago_core.variants.rewrite_checks import (
    AUXILIARIES,
    IMPERATIVES,
    QUESTION_WORDS,
    english_form,
)
from sago_core.variants.structural import (
    RewriteTask,
    check_rewrite,
    is_question,
    target_words,
    word_count,
)


@dataclass(frozen=True)
class RuleRewrite:
    """A rule's rewrite (``text``) or why the rules give none (``reason``)."""

    text: str | None
    reason: str | None


def _wordset(words: str) -> frozenset[str]:
    return frozenset(words.split())


_SENTENCE_END = re.compile(r"[.?!]\s+\S")
_BE = _wordset("is are was were")
_HAVE = _wordset("has have had")
_DO = _wordset("do does did")
# Subjects after which a verb keeps its base form once "do" is dropped ("do we use").
_BASE_FORM_SUBJECTS = _wordset("i you we they")
_PRONOUNS = _BASE_FORM_SUBJECTS | _wordset("he she it")
_PREPOSITIONS = _wordset("in on at for from to by with of during into since")
# Words after "which"/"what"/"how" that belong to the wh-phrase ("which planet", "how many").
_WH_EXTENT = 3
_QUESTION_LEAD_INS = (
    "I have a question.",
    "It is something I want to know.",
    "I have been thinking about it for a while.",
    "The question came up in a conversation recently.",
    "I am trying to get a clear answer to it.",
    "Here is exactly how I would put the question.",
)
_COMMAND_LEAD_INS = (
    "I have a task.",
    "It is something I need done.",
    "I have been thinking about it for a while.",
    "The task came up in a conversation recently.",
    "I am trying to get a clear result for it.",
    "Here is exactly how I would put the task.",
)
# Words whose loss changes no meaning ("just" and "really" can: "just war", "is it really").
_FILLERS = re.compile(r"\b(?:please|kindly|actually|basically)\b,?\s*", re.IGNORECASE)
_CONTRACTIONS = {
    "what is": "what's",
    "who is": "who's",
    "where is": "where's",
    "how is": "how's",
    "when is": "when's",
    "that is": "that's",
    "it is": "it's",
    "there is": "there's",
    "do not": "don't",
    "does not": "doesn't",
    "did not": "didn't",
    "is not": "isn't",
    "are not": "aren't",
    "was not": "wasn't",
    "were not": "weren't",
    "cannot": "can't",
    "can not": "can't",
    "will not": "won't",
    "would not": "wouldn't",
    "should not": "shouldn't",
    "could not": "couldn't",
    "have not": "haven't",
    "has not": "hasn't",
    "i am": "I'm",
    "you are": "you're",
    "we are": "we're",
    "they are": "they're",
    "i have": "I've",
    "you have": "you've",
    "we have": "we've",
    "they have": "they've",
    "let us": "let's",
}
_CONTRACTION = re.compile(
    r"\b(" + "|".join(re.escape(k) for k in sorted(_CONTRACTIONS, key=len, reverse=True)) + r")\b",
    re.IGNORECASE,
)
_NO_LENGTH = (
    "no rule-based rewrite: it holds nothing the rules drop (politeness, fillers, words to "
    "contract, a 'What is the X?' to ask as 'X?')"
)
_WHAT_IS_THE = re.compile(r"^what\s+(?:is|are|was|were)\s+the\s+(.+)$", re.IGNORECASE)


def _lower_first(word: str) -> str:
    """A closed-list opener ("Which", "In", "Do") in lower case, for use mid-sentence."""
    return word[:1].lower() + word[1:] if word.lower() != "i" else word


def _upper_first(text: str) -> str:
    return text[:1].upper() + text[1:]


def _body(prompt: str) -> str:
    """The prompt without its closing punctuation."""
    return prompt.strip().rstrip("?.!").strip()


def _command(clause_words: list[str]) -> str:
    return "Tell me " + " ".join(clause_words) + "."


def _yes_no_command(words: list[str]) -> str | None:
    aux, subject = words[0].lower(), words[1].lower() if len(words) > 1 else ""
    if subject not in _PRONOUNS:
        return None  # where the subject ends needs a parser
    if aux in _DO:
        if aux != "do" or subject not in _BASE_FORM_SUBJECTS:
            return None  # "does it work" -> "it works": the verb would need inflecting
        return _command(["whether", _lower_first(words[1]), *words[2:]])
    return _command(["whether", _lower_first(words[1]), aux, *words[2:]])


def _wh_command(words: list[str]) -> str | None:
    lower = [w.lower() for w in words]
    wh = 1 if lower[0] in _PREPOSITIONS else 0
    if wh >= len(lower) or lower[wh] not in QUESTION_WORDS:
        return None
    clause = [_lower_first(words[0]), *words[1:]]
    # The wh-phrase: the wh-word and up to a few words before the first auxiliary.
    aux = next(
        (i for i in range(wh + 1, min(len(lower), wh + 2 + _WH_EXTENT)) if lower[i] in AUXILIARIES),
        None,
    )
    if aux is None:
        # No auxiliary right after the wh-phrase: the wh-word is the subject of a full verb
        # ("who painted ...", "which composer wrote ..."), whose order a command keeps.
        return _command(clause) if wh == 0 and len(lower) > wh + 1 else None
    after = lower[aux + 1] if aux + 1 < len(lower) else ""
    if after in _PRONOUNS:  # inverted pronoun subject: put it back before the auxiliary
        if lower[aux] in _DO:
            if lower[aux] != "do" or after not in _BASE_FORM_SUBJECTS:
                return None
            return _command([*clause[:aux], *clause[aux + 1 :]])
        return _command([*clause[:aux], clause[aux + 1], clause[aux], *clause[aux + 2 :]])
    subject_like = wh == 0 and lower[0] in {"who", "what", "which", "how"}
    if lower[0] == "how" and (aux < 2 or lower[1] not in {"many", "much"}):
        subject_like = False  # "how old is the universe": "how old" is no subject
    if lower[-1] in _PREPOSITIONS:
        return None  # "which country is he from": the wh-phrase is no subject
    if lower[aux] in _BE and subject_like:
        return _command(clause)  # "which planet is known as ...", "who was the first ..."
    if lower[aux] in _HAVE and subject_like and aux > wh + 1:
        return _command(clause)  # "which element has the atomic number 1"
    return None


def question_to_command(prompt: str) -> str | None:
    """The prompt's question as a command, or None where the rules cannot undo its order."""
    words = _body(prompt).split()
    if len(words) < 2:
        return None
    match = _WHAT_IS_THE.match(" ".join(words))
    if match:
        return f"Tell me the {match.group(1)}."
    if words[0].lower() in AUXILIARIES:
        return _yes_no_command(words)
    return _wh_command(words)


def command_to_question(prompt: str) -> str | None:
    """An imperative prompt as the question asking for the same ("Can you list ...?")."""
    words = _body(prompt).split()
    if not words or words[0].lower() not in IMPERATIVES:
        return None
    return "Can you " + " ".join([_lower_first(words[0]), *words[1:]]) + "?"


def _contract(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        short = _CONTRACTIONS[match.group(1).lower()]
        return _upper_first(short) if match.group(1)[0].isupper() else short

    return _CONTRACTION.sub(one, text)


def shorter_candidates(prompt: str) -> list[str]:
    """Ever shorter rewrites keeping the meaning: fillers dropped, then contractions, then a
    "What is the X?" question as the bare "X?"."""
    unfilled = re.sub(r"\s+", " ", _FILLERS.sub("", prompt.strip())).strip()
    candidates = [_upper_first(unfilled) if prompt[:1].isupper() else unfilled]
    candidates.append(_contract(candidates[-1]))
    match = _WHAT_IS_THE.match(_body(unfilled))
    if match:
        candidates.append(_upper_first(match.group(1)) + "?")
    return candidates


def longer_candidates(prompt: str, question: bool) -> list[str]:
    """The prompt after one, two, ... neutral lead-in sentences."""
    lead_ins = _QUESTION_LEAD_INS if question else _COMMAND_LEAD_INS
    return [" ".join((*lead_ins[:k], prompt.strip())) for k in range(1, len(lead_ins) + 1)]


def _length_rewrite(prompt: str, task: RewriteTask, references: tuple[str, ...]) -> RuleRewrite:
    m = task.strength
    if m < 1:
        candidates = shorter_candidates(prompt)
    else:
        candidates = longer_candidates(prompt, is_question(prompt))
    usable = [c for c in candidates if check_rewrite(prompt, c, task, references) is None]
    if not usable:
        return RuleRewrite(
            None, _NO_LENGTH if m < 1 else "no rule-based rewrite: none lengthens it"
        )
    goal = target_words(prompt, m)
    best = min(usable, key=lambda c: (abs(word_count(c) - goal), word_count(c)))
    ratio = word_count(best) / max(word_count(prompt), 1)
    if abs(ratio - m) >= abs(1 - ratio):
        return RuleRewrite(
            None,
            f"no rule-based rewrite near length x{m:g}: the nearest the rules reach has "
            f"{word_count(best)} words for a target of {goal} (ratio {ratio:.2f})",
        )
    return RuleRewrite(best, None)


def rule_rewrite(prompt: str, task: RewriteTask, references: tuple[str, ...] = ()) -> RuleRewrite:
    """The rule-based rewrite of ``prompt`` for ``task``, checked by ``check_rewrite``; or
    why there is none (another language, a form or word order the rules do not handle)."""
    form = english_form(prompt)
    if form is None:
        return RuleRewrite(
            None,
            "no rule-based rewrite: the rules rewrite English questions and commands only, "
            "and this prompt does not read as one",
        )
    if _SENTENCE_END.search(prompt.strip()):
        return RuleRewrite(None, "no rule-based rewrite: the rules rewrite one-sentence prompts")
    if task.subtype == "length":
        return _length_rewrite(prompt, task, references)
    text = question_to_command(prompt) if is_question(prompt) else command_to_question(prompt)
    if text is None:
        return RuleRewrite(
            None,
            "no rule-based rewrite: the rules cannot change this prompt's mood without "
            "parsing it (its subject or verb would need finding or inflecting)",
        )
    problem = check_rewrite(prompt, text, task, references)
    if problem is not None:
        return RuleRewrite(None, f"the rule-based rewrite failed its checks: {problem}")
    return RuleRewrite(text, None)
