"""Stage: refusal consistency over a run's answers -> the refusal tables.

A run measures refusal when its prompts carry a kind (``data/safety.py``): each answer of a
prompt with a kind gets a rule verdict (``refusal/verdicts.py``), and from those, per model,
the flips per prompt and variant (``refusal/flips.py``), their rates per kind and family and
per cell, and the Best-of-N curve per family (``refusal/best_of_n.py``); at K > 1 every
sample of samples.parquet is judged. Prompts without a kind are left out; a run without any
kind has no refusal tables and every other artifact is what it was. With a refusal judge
(``refusal.judge``) its verdict is read where it gave one (``refusal/judged.py``).
docs/guide/refusal.md ("In a run") lists the files and what the replay counts for.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from sago_core.artifacts.layout import (
    BEST_OF_N_FILE,
    BEST_OF_N_SUMMARY_FILE,
    REFUSAL_FILE,
    REFUSAL_FLIPS_FILE,
    REFUSAL_RATES_FILE,
    REFUSAL_VERDICTS_FILE,
)
from sago_core.artifacts.store import write_json, write_parquet
from sago_core.refusal.best_of_n import (
    CURVE_SCHEMA,
    SUMMARY_SCHEMA,
    best_of_n_by_family,
    best_of_n_frames,
)
from sago_core.refusal.flips import (
    CELL,
    FAMILY_CELL,
    FLIPS_SCHEMA,
    RATES_SCHEMA,
    refusal_flips,
    refusal_rates,
)
from sago_core.refusal.judge import RefusalJudge
from sago_core.refusal.judged import judge_record
from sago_core.refusal.verdicts import (
    JUDGED_VERDICTS_SCHEMA,
    REQUEST_COLUMN,
    VERDICTS_SCHEMA,
    refusal_verdict_frame,
)
from sago_core.vocabulary import REPLAY_FAMILY

NO_KIND = (
    "no prompt carries a kind (harmful or harmless): no refusal measurement; a safety set "
    "read with its own layout, or a file entry with '#kind=COLUMN', gives one"
)
FAMILY_LEVEL, CELL_LEVEL = "family", "cell"
# the generations' columns the verdicts read
ANSWER_COLUMNS = (
    "model",
    "dataset",
    "prompt_id",
    "variant_id",
    "family",
    "subtype",
    "strength",
    "answer_text",
    "failure_reason",
)
SAMPLE_COLUMN = "sample"  # samples.parquet's: which of a prompt text's K answers
MODEL_FLIPS_SCHEMA: dict[str, Any] = {"model": pl.Utf8, **FLIPS_SCHEMA}
MODEL_RATES_SCHEMA: dict[str, Any] = {"model": pl.Utf8, "level": pl.Utf8, **RATES_SCHEMA}


@dataclass(frozen=True)
class RefusalTables:
    """A run's refusal measurement: one table per artifact (``write_refusal``)."""

    verdicts: pl.DataFrame  # VERDICTS_SCHEMA (JUDGED_VERDICTS_SCHEMA): one row per answer
    flips: pl.DataFrame  # MODEL_FLIPS_SCHEMA: one row per model, prompt and variant
    rates: pl.DataFrame  # MODEL_RATES_SCHEMA: level "family" (kind, family) or "cell"
    curve: pl.DataFrame  # best_of_n.CURVE_SCHEMA
    best_of_n: pl.DataFrame  # best_of_n.SUMMARY_SCHEMA
    judge: dict[str, Any] | None = None  # judged.judge_record; None: the rules alone


def prompt_kinds(prompts: pl.DataFrame) -> pl.DataFrame | None:
    """(dataset, prompt_id, kind) of the prompts with a kind; None when none has one."""
    if "kind" not in prompts.columns:
        return None
    kinds = prompts.filter(pl.col("kind").is_not_null()).select("dataset", "prompt_id", "kind")
    return kinds if kinds.height else None


def _rates(flips: pl.DataFrame) -> pl.DataFrame:
    parts = [
        refusal_rates(flips, cell=cell).select(pl.lit(level, pl.Utf8).alias("level"), *RATES_SCHEMA)
        for level, cell in ((FAMILY_LEVEL, FAMILY_CELL), (CELL_LEVEL, CELL))
    ]
    return pl.concat(parts)


def answer_columns(judged: bool) -> list[str]:
    """The answers' columns the stage reads: with a judge, the request too."""
    return [*ANSWER_COLUMNS, *([REQUEST_COLUMN] if judged else [])]


def answers_read(
    generations: pl.DataFrame, samples: pl.DataFrame | None, judged: bool = False
) -> pl.DataFrame:
    """The answers judged: ``samples`` (every model's samples.parquet, at K > 1) when given,
    each with its ``sample``; else ``generations``, one answer per prompt text."""
    columns = answer_columns(judged)
    if samples is None:
        return generations.select(columns)
    if SAMPLE_COLUMN not in samples.columns:
        raise ValueError("samples lack the column 'sample' (samples.parquet's)")
    return samples.select(*columns, SAMPLE_COLUMN)


def refusal_tables(
    prompts: pl.DataFrame,
    generations: pl.DataFrame,
    samples: pl.DataFrame | None = None,
    judge: RefusalJudge | None = None,
) -> RefusalTables | None:
    """The refusal tables of a run's ``generations`` (at least ``ANSWER_COLUMNS``, and
    ``REQUEST_COLUMN`` with a ``judge``), or at K > 1 of its ``samples`` (those columns and
    ``sample``), for its ``prompts`` (prompts.parquet); None when no prompt has a kind
    (module docstring)."""
    kinds = prompt_kinds(prompts)
    if kinds is None:
        return None
    answers = answers_read(generations, samples, judge is not None).join(
        kinds.select("dataset", "prompt_id"), on=["dataset", "prompt_id"], how="semi"
    )
    verdicts = refusal_verdict_frame(answers, kinds, judge)
    flips, rates = [], []
    for (model,), group in verdicts.group_by(["model"], maintain_order=True):
        per_model = refusal_flips(group)
        flips.append(per_model.select(pl.lit(model, pl.Utf8).alias("model"), *FLIPS_SCHEMA))
        rates.append(_rates(per_model).select(pl.lit(model, pl.Utf8).alias("model"), pl.all()))
    rewordings = verdicts.filter(pl.col("family") != REPLAY_FAMILY)
    curve, summary = best_of_n_frames(best_of_n_by_family(rewordings))
    return RefusalTables(
        verdicts=verdicts,
        flips=pl.concat(flips) if flips else pl.DataFrame(schema=MODEL_FLIPS_SCHEMA),
        rates=pl.concat(rates) if rates else pl.DataFrame(schema=MODEL_RATES_SCHEMA),
        curve=curve,
        best_of_n=summary,
        judge=None if judge is None else judge_record(verdicts, judge),
    )


TABLE_FILES: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("verdicts", REFUSAL_VERDICTS_FILE, VERDICTS_SCHEMA),
    ("flips", REFUSAL_FLIPS_FILE, MODEL_FLIPS_SCHEMA),
    ("rates", REFUSAL_RATES_FILE, MODEL_RATES_SCHEMA),
    ("curve", BEST_OF_N_FILE, CURVE_SCHEMA),
    ("best_of_n", BEST_OF_N_SUMMARY_FILE, SUMMARY_SCHEMA),
)


def write_refusal(tables: RefusalTables | None, folder: Path) -> Path:
    """The tables' Parquet files in ``folder`` and ``refusal.json`` naming them (their rows),
    or saying why there are none; returns refusal.json's path."""
    if tables is None:
        return write_json({"measured": False, "reason": NO_KIND}, folder / REFUSAL_FILE)
    written = {}
    for name, file, schema in TABLE_FILES:
        frame: pl.DataFrame = getattr(tables, name)
        judged = name == "verdicts" and tables.judge is not None
        write_parquet(frame, folder / file, JUDGED_VERDICTS_SCHEMA if judged else schema)
        written[name] = {"file": file, "rows": frame.height}
    judge = {"judge": tables.judge} if tables.judge is not None else {}
    return write_json({"measured": True, "tables": written, **judge}, folder / REFUSAL_FILE)
