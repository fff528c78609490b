"""The report's and card's per-language and per-script tables.

Per model and language of the ``language`` family (after a row for the English base
answers), and per method of the ``script`` family (strengths pooled): the mean |delta_norm|
per axis (deltas.parquet; an axis no variant of the row could measure is NA, its reason
said once under the table), ``lang`` fidelity and the languages the answers were identified
in (generations.parquet), the shares of right answers in English and in the variant's
language and both flip rates (instances.parquet, ``statistics/tails.subtype_flips``).
docs/tutorials/languages.md ("Where to read the results") describes the columns.

``language_sections`` gives the report's HTML; ``language_card`` the card's JSON values
from a run folder and ``language_blocks`` its (heading, headers, rows, notes) blocks.
"""

from __future__ import annotations

import html
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl

from sago_core.artifacts.layout import DELTAS_FILE, GENERATIONS_FILE, INSTANCES_FILE
from sago_core.axes.language_fidelity import lang_measurements
from sago_core.axes.reasoning import with_answers
from sago_core.registry.axes import axes_for
from sago_core.report.flip_words import flip_headers, sampled
from sago_core.report.markup import table
from sago_core.statistics.tails import subtype_flips
from sago_core.vocabulary import BASE_LANGUAGE, BASE_VARIANT_ID, LANGUAGE_FAMILY, ROW_KEY

SCRIPT_FAMILY = "script"
BASE_ROW = f"{BASE_LANGUAGE} (base)"
DETECTED_SHOWN = 3  # languages listed in "answers in"
Block = tuple[str, list[str], list[list[str]], list[str]]


def _axes(deltas: pl.DataFrame) -> list[str]:
    """The run's axes present in ``deltas``, in the registry's order."""
    present = set(deltas["axis"].unique().to_list())
    families = deltas["family"].unique().to_list()
    return [spec.name for spec in axes_for(families) if spec.name in present]


def _detected(measured: pl.DataFrame) -> str:
    counts = Counter(d for d in measured["detected_language"].to_list() if d is not None)
    return ", ".join(f"{code} {n}" for code, n in counts.most_common(DETECTED_SHOWN)) or "NA"


def _fidelity(lang: pl.DataFrame) -> tuple[float | None, int]:
    """(share of ``lang_match`` 1 among the rows that have one, how many have one)."""
    known = lang["lang_match"].drop_nulls()
    return (float(known.cast(pl.Float64).mean()) if len(known) else None), len(known)  # type: ignore[arg-type]


def _axis_cells(rows: pl.DataFrame, axes: list[str]) -> dict[str, Any]:
    cells: dict[str, Any] = {}
    for axis in axes:
        part = rows.filter(pl.col("axis") == axis)
        values = part["delta_norm"].drop_nulls().drop_nans().abs()
        cells[f"mean_abs_{axis}"] = float(values.mean()) if len(values) else None  # type: ignore[arg-type]
        reasons = part["missing_reason"].drop_nulls()
        cells[f"reason_{axis}"] = (
            None if len(values) else (str(reasons.mode().sort()[0]) if len(reasons) else None)
        )
    return cells


def family_table(
    deltas: pl.DataFrame,
    instances: pl.DataFrame,
    measurements: pl.DataFrame,
    family: str,
) -> pl.DataFrame:
    """One row per (model, subtype) of ``family``: the module doc's columns."""
    deltas = deltas.filter(pl.col("family") == family)
    if deltas.is_empty():
        return pl.DataFrame()
    axes = _axes(deltas)
    judged = subtype_flips(instances, family)
    flips = {(r["model"], r["subtype"]): r for r in judged.iter_rows(named=True)}
    rows = []
    for (model, subtype), part in deltas.group_by(["model", "subtype"], maintain_order=True):
        measured = measurements.filter(model=model, family=family, subtype=subtype)
        fidelity, n_lang = _fidelity(measured)
        flip = flips.get((model, subtype), {})
        strengths = sorted({s for s in part["strength"].to_list() if s is not None})
        rows.append(
            {
                "model": model,
                "subtype": subtype,
                "strengths": ", ".join(f"{s:g}" for s in strengths),
                "variants": part.select("dataset", "prompt_id", "variant_id").n_unique(),
                **_axis_cells(part, axes),
                "lang_fidelity": fidelity,
                "n_lang": n_lang,
                "answers_in": _detected(measured),
                "n_judged": flip.get("n_judged", 0),
                "base_correct": flip.get("base_correct"),
                "variant_correct": flip.get("variant_correct"),
                "flip_right_to_wrong": flip.get("flip_right_to_wrong"),
                "flip_wrong_to_right": flip.get("flip_wrong_to_right"),
                "flip_missing_reason": flip.get("flip_missing_reason"),
                "flips_at_k": sampled(instances),  # K > 1: excesses (report/flip_words.py)
            }
        )
    return pl.DataFrame(rows).sort("model", "subtype")


def base_rows(instances: pl.DataFrame, measurements: pl.DataFrame) -> pl.DataFrame:
    """Per model, the English base answers: their ``lang`` fidelity and correctness."""
    rows = []
    base = measurements.filter(pl.col("variant_id") == BASE_VARIANT_ID)
    prompts = instances.unique(["model", "dataset", "prompt_id"], keep="first")
    for (model,), part in base.group_by(["model"], maintain_order=True):
        fidelity, n_lang = _fidelity(part)
        verdicts = prompts.filter(pl.col("model") == model)["base_correct"].drop_nulls()
        rows.append(
            {
                "model": model,
                "subtype": BASE_ROW,
                "variants": len(part),
                "lang_fidelity": fidelity,
                "n_lang": n_lang,
                "answers_in": _detected(part),
                "base_correct": float(verdicts.cast(pl.Float64).mean()) if len(verdicts) else None,  # type: ignore[arg-type]
                "n_judged": len(verdicts),
            }
        )
    return pl.DataFrame(rows)


def language_measurements(generations: pl.DataFrame) -> pl.DataFrame:
    """``lang_measurements`` of the base and language/script rows, with their subtype."""
    wanted = generations.filter(
        (pl.col("variant_id") == BASE_VARIANT_ID)
        | pl.col("family").is_in([LANGUAGE_FAMILY, SCRIPT_FAMILY])
    )
    measured = lang_measurements(with_answers(wanted))
    return measured.join(wanted.select(*ROW_KEY, "subtype"), on=ROW_KEY, how="left")


def language_tables(
    deltas: pl.DataFrame, instances: pl.DataFrame, generations: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(per-language table with the base row first, per-script table); empty frames for a
    run without those families."""
    families = set(deltas["family"].unique().to_list())
    if not families & {LANGUAGE_FAMILY, SCRIPT_FAMILY}:
        return pl.DataFrame(), pl.DataFrame()
    measured = language_measurements(generations)
    languages = family_table(deltas, instances, measured, LANGUAGE_FAMILY)
    if not languages.is_empty():
        languages = pl.concat([base_rows(instances, measured), languages], how="diagonal_relaxed")
    return languages, family_table(deltas, instances, measured, SCRIPT_FAMILY)


def _num(value: Any) -> str:
    if value is None:
        return "NA"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def _headers(frame: pl.DataFrame, first: str) -> tuple[list[str], list[str]]:
    axes = [c.removeprefix("mean_abs_") for c in frame.columns if c.startswith("mean_abs_")]
    headers = [
        "model",
        first,
        "variants",
        *(f"mean |d| {a}" for a in axes),
        "lang fidelity (n)",
        "answers in",
        "right (en)",
        "right (variant)",
        *flip_headers("flips_at_k" in frame.columns and bool(frame["flips_at_k"].any())),
        "judged",
    ]
    return headers, axes


def table_rows(
    frame: pl.DataFrame, script: bool = False
) -> tuple[list[str], list[list[str]], list[str]]:
    """(headers, rows of text, notes): the NA reasons of whole columns, each said once
    with the rows it holds for."""
    headers, axes = _headers(frame, "method (strengths)" if script else "language")
    rows: list[list[str]] = []
    gaps: dict[tuple[str, str], list[str]] = {}
    for r in frame.iter_rows(named=True):
        label = r["subtype"] + (f" ({r['strengths']})" if script and r.get("strengths") else "")
        fidelity = r.get("lang_fidelity")
        rows.append(
            [
                r["model"],
                label,
                _num(r.get("variants")),
                *(_num(r.get(f"mean_abs_{a}")) for a in axes),
                f"{_num(fidelity)} ({r.get('n_lang') or 0})",
                r.get("answers_in") or "NA",
                _num(r.get("base_correct")),
                _num(r.get("variant_correct")),
                _num(r.get("flip_right_to_wrong")),
                _num(r.get("flip_wrong_to_right")),
                _num(r.get("n_judged")),
            ]
        )
        if r["subtype"] == BASE_ROW:
            continue
        for a in axes:
            if r.get(f"reason_{a}"):
                gaps.setdefault((a, r[f"reason_{a}"]), []).append(label)
        if r.get("flip_missing_reason"):
            gaps.setdefault(("flips", r["flip_missing_reason"]), []).append(label)
    notes = [f"{what} NA for {', '.join(labels)}: {why}" for (what, why), labels in gaps.items()]
    return headers, rows, notes


LANGUAGE_NOTE = (
    "Each language variant is the dataset's own human translation of the English question. "
    "mean |d| is the mean |delta_norm| against the English base answer; right (en) judges the "
    "English answers against the English references, right (variant) the variant's answers "
    "against the references in its own language; flips count variants judged on both sides. "
    "lang fidelity says only in which language an answer is written: an answer that repeats "
    "the question is in the question's language, so read the answers in the explorer."
)
SCRIPT_NOTE = (
    "Each script variant writes the same question in other characters (full-width forms, "
    "look-alike letters, diacritics, romanisation); its answer is judged against the base "
    "prompt's references."
)


def _html_table(frame: pl.DataFrame, script: bool) -> str:
    headers, rows, notes = table_rows(frame, script)
    escaped = [[html.escape(cell) for cell in row] for row in rows]
    listed = "".join(f"<li>{html.escape(n)}</li>" for n in notes)
    return table(headers, escaped, left=2) + (f"<ul>{listed}</ul>" if listed else "")


def language_sections(
    deltas: pl.DataFrame, instances: pl.DataFrame | None, generations: pl.DataFrame
) -> list[str]:
    """The report's per-language and per-script sections (nothing for a run without
    language or script variants, or without instances.parquet)."""
    if instances is None:
        return []
    languages, scripts = language_tables(deltas, instances, generations)
    parts: list[str] = []
    if not languages.is_empty():
        parts += [
            "<h2>Per language</h2>",
            f"<p>{html.escape(LANGUAGE_NOTE)}</p>",
            _html_table(languages, script=False),
        ]
    if not scripts.is_empty():
        parts += [
            "<h2>Per script</h2>",
            f"<p>{html.escape(SCRIPT_NOTE)}</p>",
            _html_table(scripts, script=True),
        ]
    return parts


def language_card(run_dir: Path, model: str) -> dict[str, Any]:
    """The card's per-language and per-script rows of ``model`` (plain JSON values);
    ``available`` False for a run without those families or without instances.parquet."""
    unavailable: dict[str, Any] = {"available": False, "languages": [], "scripts": []}
    paths = [run_dir / name for name in (DELTAS_FILE, INSTANCES_FILE, GENERATIONS_FILE)]
    if not all(p.is_file() for p in paths):
        return unavailable
    families = pl.read_parquet(paths[1], columns=["family"])["family"]
    if not families.is_in([LANGUAGE_FAMILY, SCRIPT_FAMILY]).any():
        return unavailable  # read the large files only for a run with these families
    deltas, instances, generations = (
        pl.read_parquet(p).filter(pl.col("model") == model) for p in paths
    )
    languages, scripts = language_tables(deltas, instances, generations)
    return {
        "available": not (languages.is_empty() and scripts.is_empty()),
        "languages": languages.to_dicts(),
        "scripts": scripts.to_dicts(),
    }


def language_blocks(entry: dict[str, Any]) -> list[Block]:
    """The card's blocks (heading, headers, rows, notes) from ``language_card``'s values."""
    blocks: list[Block] = []
    for key, title, script, note in (
        ("languages", "Per language", False, LANGUAGE_NOTE),
        ("scripts", "Per script", True, SCRIPT_NOTE),
    ):
        if entry.get(key):
            headers, rows, notes = table_rows(pl.DataFrame(entry[key]), script)
            blocks.append((title, headers[1:], [row[1:] for row in rows], [note, *notes]))
    return blocks
