"""The six paper datasets: where their files sit under ``--data-dir`` and how rows map to prompts.

Each dataset reads its canonical local format, one subfolder per dataset under
``--data-dir``. Each dataset also names its hub id, config and split, which a missing file's
error gives as where the data comes from.

Reference answers are gold answers only. Alpaca (and AlpacaEval, read by the same reader)
holds open-ended instructions whose ``output`` is another model's answer (text-davinci-003),
so its prompts carry no references and correctness on them is missing (``NO_GOLD_ALPACA``,
each prompt's ``no_references``, prompts.parquet's ``reference_missing_reason``),
unless the user names a gold column (``gold``: ``alpaca#answer=COLUMN`` in ``datasets``, or
``file.json#answer=COLUMN``). Each reader's ``reference_columns`` says, for a record, which
column its references come from (``sago_core.data.references`` reports it per dataset).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from sago_core.data.prompt import Prompt, content_id, source_of
from sago_core.data.records import Record, read_records, require_text, text_list
from sago_core.errors import InputError

RowMapper = Callable[[Record, Path, int], Prompt]
# For a record: the column(s) its references come from, or None (no gold answers).
ReferenceColumns = Callable[[Record], str | None]

NO_GOLD_ALPACA = (
    "open-ended instructions: the `output` column is another model's answer "
    "(text-davinci-003 for Alpaca and AlpacaEval), not a gold answer, so correctness is not "
    "judged; name a gold column to judge against it (datasets entry 'alpaca#answer=COLUMN' "
    "or 'FILE#answer=COLUMN')"
)


@dataclass(frozen=True)
class DatasetSource:
    name: str
    folder: str
    patterns: tuple[str, ...]  # tried in order inside ``folder``
    hub_id: str
    hub_config: str | None
    hub_split: str
    to_prompt: RowMapper
    reference_columns: ReferenceColumns
    no_references: str | None = None  # why this dataset has no gold answers (None: it has)


def _truthfulqa(rec: Record, path: Path, row: int) -> Prompt:
    if "Question" not in rec and "question" in rec:  # hub layout: snake_case, list answers
        question = require_text(rec, "question", file=path, row=row)
        refs = text_list(rec.get("best_answer")) + text_list(rec.get("correct_answers"))
        return Prompt(
            "truthfulqa", content_id("tqa", question), question, tuple(dict.fromkeys(refs))
        )
    question = require_text(rec, "Question", file=path, row=row)
    refs = text_list(rec.get("Best Answer")) + text_list(rec.get("Correct Answers"), separator=";")
    return Prompt("truthfulqa", content_id("tqa", question), question, tuple(dict.fromkeys(refs)))


def _nq_open(rec: Record, path: Path, row: int) -> Prompt:
    question = require_text(rec, "question", file=path, row=row)
    return Prompt("nq_open", content_id("nq", question), question, text_list(rec.get("answer")))


def _alpaca(rec: Record, path: Path, row: int) -> Prompt:
    instruction = require_text(rec, "instruction", file=path, row=row)
    extra = rec.get("input") or ""
    if not isinstance(extra, str):
        raise InputError("must be text", file=str(path), row=row, column="input")
    prompt = f"{instruction}\n\n{extra.strip()}" if extra.strip() else instruction
    return Prompt("alpaca", content_id("alpaca", prompt), prompt, no_references=NO_GOLD_ALPACA)


def _simpleqa(rec: Record, path: Path, row: int) -> Prompt:
    question = require_text(rec, "problem", file=path, row=row)
    index = str(rec.get("original_index") or "").strip()
    pid = f"sqa-{index}" if index else content_id("sqa", question)
    return Prompt("simpleqa_verified", pid, question, text_list(rec.get("answer")))


def _triviaqa(rec: Record, path: Path, row: int) -> Prompt:
    if "Question" in rec:  # official TriviaQA JSON
        question = require_text(rec, "Question", file=path, row=row)
        answer = rec.get("Answer") or {}
        refs = text_list(answer.get("Value")) + text_list(answer.get("Aliases"))
        pid = str(rec.get("QuestionId") or content_id("tqa", question))
        return Prompt("triviaqa", f"trivia-{pid}", question, tuple(dict.fromkeys(refs)))
    question = require_text(rec, "question", file=path, row=row)
    answer = rec.get("answer")
    if isinstance(answer, dict):  # hub layout: answer {value, aliases, ...}
        refs = text_list(answer.get("value")) + text_list(answer.get("aliases"))
    else:
        refs = text_list(rec.get("golden_answers") or answer)
    native = rec.get("id") or rec.get("question_id")
    pid = f"trivia-{native}" if native else content_id("trivia", question)
    return Prompt("triviaqa", pid, question, tuple(dict.fromkeys(refs)))


def _hotpotqa(rec: Record, path: Path, row: int) -> Prompt:
    question = require_text(rec, "question", file=path, row=row)
    native = rec.get("_id") or rec.get("id")
    pid = f"hotpot-{native}" if native else content_id("hotpot", question)
    return Prompt("hotpotqa", pid, question, text_list(rec.get("answer")))


def _truthfulqa_columns(rec: Record) -> str:
    if "Question" not in rec and "question" in rec:
        return "best_answer + correct_answers"
    return "Best Answer + Correct Answers (split at ';')"


def _triviaqa_columns(rec: Record) -> str:
    if "Question" in rec:
        return "Answer.Value + Answer.Aliases"
    if isinstance(rec.get("answer"), dict):
        return "answer.value + answer.aliases"
    return "golden_answers" if rec.get("golden_answers") else "answer"


def _column(name: str) -> ReferenceColumns:
    return lambda rec: name


SOURCES: dict[str, DatasetSource] = {
    s.name: s
    for s in (
        DatasetSource(
            "truthfulqa",
            "truthfulqa",
            ("TruthfulQA.csv", "*.csv"),
            "truthfulqa/truthful_qa",
            "generation",
            "validation",
            _truthfulqa,
            _truthfulqa_columns,
        ),
        DatasetSource(
            "nq_open",
            "nq_open",
            ("NQ-open.dev.jsonl", "*.jsonl"),
            "google-research-datasets/nq_open",
            "nq_open",
            "validation",
            _nq_open,
            _column("answer"),
        ),
        DatasetSource(
            "alpaca",
            "alpaca",
            ("alpaca_data*.json", "*.json"),
            "tatsu-lab/alpaca",
            None,
            "train",
            _alpaca,
            lambda rec: None,
            NO_GOLD_ALPACA,
        ),
        DatasetSource(
            "simpleqa_verified",
            "simpleqa_verified",
            ("simpleqa_verified*.csv", "*.csv"),
            "google/simpleqa-verified",
            None,
            "eval",
            _simpleqa,
            _column("answer"),
        ),
        DatasetSource(
            "triviaqa",
            "triviaqa",
            ("*.jsonl", "*.json"),
            "mandarjoshi/trivia_qa",
            "unfiltered.nocontext",
            "validation",
            _triviaqa,
            _triviaqa_columns,
        ),
        DatasetSource(
            "hotpotqa",
            "hotpotqa",
            ("hotpot_dev*.json", "*.json"),
            "hotpotqa/hotpot_qa",
            "distractor",
            "validation",
            _hotpotqa,
            _column("answer"),
        ),
    )
}


def find_dataset_file(source: DatasetSource, data_dir: Path) -> Path:
    folder = data_dir / source.folder
    for pattern in source.patterns:
        matches = sorted(folder.glob(pattern))
        if matches:
            return matches[0]
    config = f", config {source.hub_config}" if source.hub_config else ""
    raise InputError(
        f"no {source.name} data found (looked for {', '.join(source.patterns)} in {folder}; "
        f"the data set is {source.hub_id} on the Hugging Face hub{config}, split "
        f"{source.hub_split})",
        file=str(folder),
    )


def check_gold_column(records: list[Record], gold: str, path: Path) -> None:
    """A named gold column must exist in the file (an error naming file and column)."""
    present = set().union(*(r.keys() for r in records[:50])) if records else set()
    if gold not in present:
        raise InputError(
            f"the gold column {gold!r} named by answer={gold} is not in the file "
            f"(columns present: {sorted(present)})",
            file=str(path),
            column=gold,
        )


def with_gold(prompt: Prompt, rec: Record, gold: str | None) -> Prompt:
    """The prompt with its references read from the user's gold column, when one is named
    (the reader's reason for having none no longer applies)."""
    if gold is None:
        return prompt
    return replace(prompt, references=text_list(rec.get(gold)), no_references=None)


def load_dataset_file(source: DatasetSource, path: Path, gold: str | None = None) -> list[Prompt]:
    """``gold``: a column the user names as the gold answers (replaces the reader's own)."""
    records = read_records(path)
    if gold is not None:
        check_gold_column(records, gold, path)
    return [
        replace(
            with_gold(source.to_prompt(rec, path, row), rec, gold), source=source_of(str(path), row)
        )
        for row, rec in enumerate(records, 1)
    ]
