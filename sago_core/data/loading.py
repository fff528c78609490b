"""Resolve dataset names or paths to prompts, validate them, sample N per dataset."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

from sago_core.artifacts.store import sha256_of
from sago_core.config import (
    BUILTIN_DATASET,
    DATASET_NAMES,
    PARALLEL_LAYOUTS,
    RunConfig,
    parallel_entry,
)
from sago_core.data.builtin import builtin_prompts
from sago_core.data.datasets import SOURCES, find_dataset_file, load_dataset_file
from sago_core.data.mkqa import read_parallel
from sago_core.data.prompt import Prompt, content_id, source_of
from sago_core.data.records import (
    PromptRules,
    Record,
    check_prompt,
    require_text,
    text_list,
)
from sago_core.data.references import GENERIC_NONE
from sago_core.data.safety import detect_safety_layout, read_safety, with_kinds
from sago_core.data.sampling import sample_prompts
from sago_core.data.user_files import (
    FileEntry,
    detect_layout,
    keeps_layout,
    load_records,
    parse_entry,
    parse_named,
    read_with_layout,
)
from sago_core.errors import ConfigError, InputError
from sago_core.vocabulary import BASE_LANGUAGE

DEFAULT_RULES = PromptRules()
log = logging.getLogger("sago.data")


def _generic(
    entry: FileEntry, records: list[Record], question_column: str, rules: PromptRules
) -> tuple[list[Prompt], list[str]]:
    path = entry.path
    question = entry.column("question") or question_column
    answer = entry.column("answer")
    id_column = entry.column("id")
    prompts, warnings = [], []
    for row, rec in enumerate(records, start=1):
        text = require_text(rec, question, file=path, row=row)
        warning = check_prompt(text, rules, file=path, row=row, column=question)
        if warning:
            warnings.append(warning)
        raw_id = rec.get(id_column) if id_column else (rec.get("id") or rec.get("prompt_id"))
        pid = str(raw_id) if raw_id not in (None, "") else content_id(path.stem, text)
        unmapped = not answer and "answers" not in rec and "answer" not in rec
        if answer:
            refs = text_list(rec.get(answer))
        else:
            refs = text_list(rec.get("answers") if "answers" in rec else rec.get("answer"))
        source = source_of(str(path), row)
        reason = GENERIC_NONE if unmapped else None
        prompts.append(Prompt(path.stem, pid, text, refs, source=source, no_references=reason))
    return prompts, warnings


def load_user_file(
    path: Path | FileEntry, question_column: str = "question", rules: PromptRules = DEFAULT_RULES
) -> list[Prompt]:
    """A user's own CSV/JSONL/JSON/Parquet file; dataset name = file stem. With a per-file
    mapping its columns are the mapped ones; without one, a file in one of the six datasets'
    own layouts is read by that dataset's reader (user_files.py; a mapping of ``answer`` alone
    keeps the layout and names the gold column). Placeholder-like text is
    logged as a warning naming the rows (an error under ``strict_placeholders``)."""
    entry = path if isinstance(path, FileEntry) else FileEntry(path)
    records = load_records(entry)
    keep = keeps_layout(entry) and question_column == "question"
    safety = detect_safety_layout(records) if keep else None
    layout = detect_layout(records) if keep and safety is None else None
    if layout is None and safety is None:
        prompts, warnings = _generic(entry, records, question_column, rules)
    else:
        if safety is not None:
            prompts = read_safety(safety, entry.path, records)
        elif layout is not None:
            prompts = read_with_layout(layout, entry.path, records, entry.column("answer"))
        warnings = [
            w
            for row, p in enumerate(prompts, start=1)
            if (w := check_prompt(p.prompt, rules, file=entry.path, row=row, column="prompt"))
        ]
    kind = entry.column("kind")
    if kind is not None:  # data/safety.py: a named kind column overrides the layout's kinds
        prompts = with_kinds(prompts, records, kind, entry.path)
    if warnings:
        shown = "; ".join(warnings[:5]) + (
            f"; and {len(warnings) - 5} more" if len(warnings) > 5 else ""
        )
        log.warning("%d prompt(s) hold placeholder-like text: %s", len(warnings), shown)
    return prompts


def load_parallel_prompts(
    layout: str, path: Path, languages: tuple[str, ...] | None = None
) -> list[Prompt]:
    """A parallel file's base-language (English) questions: the prompts. Every language of
    ``languages`` is checked against the file first (refused, naming the codes it carries,
    before any model loads); a row without an English question has no base and is left
    out, with a warning naming it and why."""
    questions = read_parallel(layout, path, (BASE_LANGUAGE, *(languages or ())))
    lost = [m for m in questions.missing if m.language == BASE_LANGUAGE]
    if lost:
        shown = "; ".join(f"{m.source}: {m.reason}" for m in lost[:5])
        log.warning("%d row(s) of %s have no base question, left out: %s", len(lost), path, shown)
    return questions.in_language(BASE_LANGUAGE)


def _load_one(
    name: str,
    data_dir: Path | None,
    question_column: str,
    rules: PromptRules,
    languages: tuple[str, ...] | None = None,
) -> list[Prompt]:
    if name == BUILTIN_DATASET:
        return builtin_prompts()
    parallel = parallel_entry(name)
    if parallel is not None:
        return load_parallel_prompts(*parallel, languages)
    entry = parse_entry(name)
    known, gold = parse_named(name) if entry is None else (name, None)
    if known in SOURCES:
        if data_dir is None:
            raise ConfigError(
                f"dataset {known!r} needs --data-dir (a folder with one subfolder per dataset; "
                "docs: guide/datasets-and-variants, the data-dir layout) "
                "or the hub extra with a network"
            )
        source = SOURCES[known]
        return load_dataset_file(source, find_dataset_file(source, data_dir), gold)
    if entry is not None:
        if not entry.path.exists():
            raise InputError("does not exist", file=str(entry.path))
        return load_user_file(entry, question_column, rules)
    known = ", ".join((BUILTIN_DATASET, *DATASET_NAMES))
    layouts = ", ".join(f"{layout}:PATH" for layout in PARALLEL_LAYOUTS)
    raise ConfigError(
        f"unknown dataset {name!r}; use one of {known}, a data file path, or a parallel file "
        f"({layouts})"
    )


def check_unique_ids(prompts: list[Prompt], origin: str) -> None:
    seen: dict[tuple[str, str], int] = {}
    for row, prompt in enumerate(prompts, start=1):
        key = (prompt.dataset, prompt.prompt_id)
        if key in seen:
            raise InputError(
                f"duplicate prompt id {prompt.prompt_id!r} (first at row {seen[key]})",
                file=origin,
                row=row,
                column="prompt_id",
            )
        seen[key] = row


def load_prompts(
    datasets: tuple[str, ...],
    data_dir: Path | None,
    n: int,
    seed: int,
    question_column: str = "question",
    rules: PromptRules = DEFAULT_RULES,
    languages: tuple[str, ...] | None = None,
) -> list[Prompt]:
    """All requested datasets, validated and sampled (N per dataset, seeded). ``rules``
    apply to users' own files (the known datasets are read as published); ``languages``
    are checked against each parallel file (``mkqa:PATH``, ``parallel:PATH``)."""
    chosen: list[Prompt] = []
    for name in datasets:
        prompts = _load_one(name, data_dir, question_column, rules, languages)
        if not prompts:
            raise InputError("holds no rows", file=name)
        check_unique_ids(prompts, name)
        chosen.extend(sample_prompts(prompts, n, seed))
    check_unique_ids(chosen, "the combined datasets")
    return chosen


def source_digest(datasets: tuple[str, ...], data_dir: Path | None) -> str:
    """Digest of the data files behind the requested datasets (built-ins: their code)."""
    digest = hashlib.sha256()
    for name in datasets:
        digest.update(name.encode())
        entry = parse_entry(name)
        known = parse_named(name)[0] if entry is None else name
        parallel = parallel_entry(name)
        if parallel is not None and parallel[1].is_file():
            digest.update(sha256_of(parallel[1]).encode())
        elif known in SOURCES and data_dir is not None:
            digest.update(sha256_of(find_dataset_file(SOURCES[known], data_dir)).encode())
        elif entry is not None and entry.path.is_file():
            digest.update(sha256_of(entry.path).encode())
    return digest.hexdigest()


def load_run_prompts(config: RunConfig) -> list[Prompt]:
    """The prompts of a run, under its config's rules for users' own files."""
    rules = PromptRules(
        config.max_prompt_chars, config.allow_placeholders, config.strict_placeholders
    )
    return load_prompts(
        config.datasets,
        config.data_dir,
        config.n,
        config.seed,
        config.question_column,
        rules,
        config.languages,
    )
