"""``sago site --redact-unsafe``: the site's copies of a run's report and card without the
model's answers to harmful requests.

A run's harmful prompts are those prompts.parquet marks ``kind`` harmful
(``data/safety.py``); their answers are generations.parquet's ``answer_text`` and
``response_text`` for those prompts, every variant included. In a copied page each is
replaced by ``REDACTED`` wherever the report and card put one:

- the refusal section's folded answers (``report.sections.refusal.UNSAFE_CLASS``), whole;
- the instance explorer's packed texts (``report.sections.explorer``): each string that is
  such an answer;
- any other place that quotes one, whole (HTML-escaped) or shortened (the card's worst
  instances): from the answer's first ``PREFIX`` characters, whitespace flattened, to the
  end of that quote. An answer shorter than ``PREFIX`` is replaced only where it is a whole
  element's text, so a short word ("Sure.") elsewhere in the page is left alone.

The prompts themselves stay (they are the benchmark's public text). A run with harmful
prompts whose answers cannot be read (no generations.parquet) has its report and card
replaced by a page saying so (``left_out_page``) rather than copied unredacted.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import polars as pl

from sago_core.artifacts.layout import GENERATIONS_FILE, PROMPTS_FILE
from sago_core.artifacts.store import read_parquet
from sago_core.data.safety import HARMFUL
from sago_core.report.sections.explorer import pack, unpack
from sago_core.report.sections.refusal import UNSAFE_CLASS
from sago_core.storage import attached

REDACTED = "[left out of this site: the model's answer to a harmful request]"
PREFIX = 24  # characters of an answer that identify it in a shortened quote
_FOLDED = re.compile(rf'<details class="{UNSAFE_CLASS}">.*?</details>', re.DOTALL)
_EXPLORER = re.compile(r'(<script type="text/plain" id="explorer-data">)([^<]*)(</script>)')
_QUOTE_END = '<“”"'  # a shortened quote ends at a tag or a closing quote mark


def harmful_answers(run_folder: Path) -> frozenset[str] | None:
    """The run's answers to its harmful prompts (empty: no harmful prompt); None when it
    has harmful prompts but no generations to read their answers from."""
    prompts_path = run_folder / PROMPTS_FILE
    if not attached.ensure_local(prompts_path):
        return frozenset()
    prompts = read_parquet(prompts_path)
    if "kind" not in prompts.columns:
        return frozenset()
    harmful = prompts.filter(pl.col("kind") == HARMFUL).select("dataset", "prompt_id")
    if harmful.is_empty():
        return frozenset()
    generations_path = run_folder / GENERATIONS_FILE
    if not attached.ensure_local(generations_path):
        return None
    columns = ["dataset", "prompt_id", "answer_text", "response_text"]
    answers = read_parquet(generations_path, columns).join(
        harmful, on=["dataset", "prompt_id"], how="semi"
    )
    texts = {
        t
        for column in ("answer_text", "response_text")
        if column in answers.columns
        for t in answers.get_column(column).to_list()
        if t and t.strip()
    }
    return frozenset(texts)


def _explorer(match: re.Match[str], answers: frozenset[str]) -> str:
    data = unpack(match.group(2))
    data["strings"] = [REDACTED if s in answers else s for s in data["strings"]]
    return match.group(1) + pack(data) + match.group(3)


def _quotes(answers: frozenset[str]) -> list[re.Pattern[str]]:
    patterns = []
    for answer in sorted(answers, key=len, reverse=True):
        flat = " ".join(answer.split())
        for quote in (True, False):  # escaped as the report's cells are, and text nodes
            if len(flat) >= PREFIX:
                start = re.escape(html.escape(flat[:PREFIX], quote=quote))
                patterns.append(re.compile(start + f"[^{_QUOTE_END}]*"))
            else:
                whole = re.escape(html.escape(answer, quote=quote))
                patterns.append(re.compile(f"(?<=>){whole}(?=<)"))
    return patterns


def redact_page(page: bytes, answers: frozenset[str]) -> bytes:
    """``page`` (a report or card) with every answer in ``answers`` replaced (module
    docstring); unchanged when ``answers`` is empty."""
    if not answers:
        return page
    text = page.decode("utf-8")
    text = _FOLDED.sub(f"<p><i>{html.escape(REDACTED)}</i></p>", text)
    text = _EXPLORER.sub(lambda m: _explorer(m, answers), text)
    flat_answers = frozenset(" ".join(a.split()) for a in answers)
    for answer in sorted(answers | flat_answers, key=len, reverse=True):
        if len(answer) >= PREFIX:  # whole first: a quote mark inside would end a prefix's run
            for quote in (True, False):
                text = text.replace(html.escape(answer, quote=quote), html.escape(REDACTED))
    for pattern in _quotes(answers | flat_answers):
        text = pattern.sub(html.escape(REDACTED), text)
    return text.encode("utf-8")


def left_out_page(name: str) -> bytes:
    """What stands in the site for a run's ``name`` (report or card) when its answers to
    harmful requests cannot be told apart."""
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>left out</title></head>"
        f"<body><p>This run's {html.escape(name)} is left out of this site: it holds answers "
        "to harmful requests, and without the run's generations.parquet they cannot be told "
        "apart from the others (sago site --redact-unsafe).</p></body></html>"
    ).encode()
