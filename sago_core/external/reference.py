"""The SAGO reference code's result CSVs -> rows of the input schema.

Columns: ``model, prompt_id, place, strength, category, prompt_orig, prompt_pert,
response_orig, response_pert`` (others ignored); the aggregated CSV adds ``style`` (or
``variation``), ``dataset`` and ``run_path``. Names, slugs and baselines: ``reference_layout``;
repeated runs of one (model, dataset, family): ``reference_runs``. docs/tutorials/
score-generations.md ("The SAGO reference code's results") says how a file is read.

One prompt is one unit. The reference code asks the base prompt again on every row, so a
prompt has several base answers, each a *base sample* of that one prompt, never a prompt of
its own: sample 0 (the first in file order) is the base row, every other a replay
``replay:base:<k>:global``, so the noise floor is the API's own variation and n is the
number of prompts. Every other row is a variant compared with the base answer asked on its
own row (its ``paired_base``), as the reference code computes each row's delta; only the
aggregation is sago's. The family: ``--family``/``--subtype``, else ``style``, else the run
folder's name, else the folder's own; the dataset: the ``dataset`` column, else the run
folder's, else ``category``, else the file's stem.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sago_core.errors import InputError
from sago_core.external.columns import Record, require_columns
from sago_core.external.options import ExternalSource
from sago_core.external.reference_layout import (
    FAMILY_NAMES,
    MOOD_LABELS,
    baseline_of,
    dataset_of,
    family_of,
    parse_run_folder,
)
from sago_core.external.reference_runs import Duplicate, Run, choose_runs
from sago_core.external.schema import DEFAULT_MODEL, PAIRED_BASE, VariantKey, variant_id_of
from sago_core.variants.structural import is_question
from sago_core.vocabulary import BASE_FAMILY, BASE_VARIANT_ID, REPLAY_FAMILY

REQUIRED = (
    "prompt_id",
    "place",
    "strength",
    "prompt_orig",
    "prompt_pert",
    "response_orig",
    "response_pert",
)
COLUMNS = ("model", *REQUIRED, "category")
STYLE_COLUMNS = ("style", "variation")  # the reference's aggregated CSVs name it either way
PLACES = {
    "prefix": "prefix",
    "suffix": "suffix",
    "global": "global",
    "start": "prefix",
    "end": "suffix",
    "all": "global",
}
SEVERAL_BASES = "prompts whose base answers differ"
BASE_ANSWERS = "base answers per prompt"
UNCHANGED = "rows whose prompt is the base unchanged (read as the base asked again)"
RUNS_READ = "runs read"
LEFT_OUT = "duplicate runs left out"
_SAMPLE = "__base_sample__"  # a variant's own row's base answer: its index in the samples


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _run_folder(record: Record, file: str) -> tuple[str, str | None]:
    """The run's folder name and the folder above it."""
    path = Path(str(record.get("run_path") or "").strip() or Path(file).parent)
    return path.name, path.parent.name or None


def family_of_run(record: Record, source: ExternalSource, file: str, row: int) -> tuple[str, str]:
    """(family, subtype): the options, else the style column, else the folders' names."""
    style = next((str(record[c]) for c in STYLE_COLUMNS if str(record.get(c) or "").strip()), None)
    if style is not None and family_of(style) is None:
        raise InputError(
            f"unknown variation family {style!r} (known: {', '.join(FAMILY_NAMES)})",
            file=file,
            row=row,
            column=next(c for c in STYLE_COLUMNS if record.get(c)),
        )
    name, parent = _run_folder(record, file)
    parsed = parse_run_folder(name, parent)
    default = (
        family_of(style) or family_of(parsed.family_slug if parsed else None) or family_of(name)
    )
    family = source.family or (default[0] if default else None)
    subtype = source.subtype or (default[1] if default and default[0] == family else None)
    if family is None or subtype is None:
        raise InputError(
            f"the reference CSVs name the variant family in their folder (run_<model>_"
            f"<dataset>_<family>_<stamp>) or a 'style' column, and {name!r} names none of "
            f"{sorted(FAMILY_NAMES)}: give --family and --subtype",
            file=file,
        )
    return family, subtype


def _dataset_of_run(record: Record, file: str) -> str | None:
    name, parent = _run_folder(record, file)
    parsed = parse_run_folder(name, parent)
    return dataset_of(record.get("dataset")) or (parsed.dataset if parsed else None)


def _stamp(record: Record, file: str) -> str:
    parsed = parse_run_folder(*_run_folder(record, file))
    return parsed.stamp if parsed else ""


def _answered(record: Record) -> bool:
    return bool(_text(record.get("response_orig")).strip()) and bool(
        _text(record.get("response_pert")).strip()
    )


def _runs(records: list[Record], source: ExternalSource, file: str) -> list[Run]:
    """One run per (run folder or file, model), in file order."""
    members: dict[tuple[str, str], list[int]] = {}
    for index, record in enumerate(records):
        model = str(record.get("model") or source.model or DEFAULT_MODEL).strip()
        members.setdefault((str(record.get("run_path") or file), model), []).append(index)
    runs = []
    for (where, model), rows in members.items():
        first = records[rows[0]]
        family, subtype = family_of_run(first, source, file, rows[0] + 1)
        dataset = _dataset_of_run(first, file) or str(first.get("category") or Path(file).stem)
        answered = sum(_answered(records[i]) for i in rows)
        stamp = _stamp(first, file)
        runs.append(Run(where, model, dataset, family, subtype, stamp, answered, tuple(rows)))
    return runs


def _place(record: Record, file: str, row: int) -> str:
    place = str(record.get("place") or "").strip().lower()
    if place not in PLACES:
        raise InputError(
            f"unknown place {place!r} (known: {', '.join(PLACES)})",
            file=file,
            row=row,
            column="place",
        )
    return PLACES[place]


def _strength(record: Record, subtype: str, base_text: str, file: str, row: int) -> float:
    """The row's strength; a mood label (``interrogative``, ``imperative``) becomes how much
    the mood changed: 1 when it differs from the base prompt's, 0 when it keeps it."""
    value = _text(record.get("strength")).strip()
    if subtype == "mood" and value.lower() in MOOD_LABELS:
        return 0.0 if MOOD_LABELS[value.lower()] == is_question(base_text) else 1.0
    try:
        return float(value)
    except ValueError as exc:
        labels = f" nor a mood label ({', '.join(MOOD_LABELS)})" if subtype == "mood" else ""
        raise InputError(
            f"{value!r} is not a number{labels}", file=file, row=row, column="strength"
        ) from exc


@dataclass
class _Prompt:
    """One prompt of one model: its base text, its base samples (prompt asked, answer,
    row) in file order, and its variants' rows."""

    model: str
    dataset: str
    prompt_id: str
    text: str
    row: int
    samples: list[tuple[str, Any, int]] = field(default_factory=list)
    variants: dict[str, Record] = field(default_factory=dict)

    def records(self) -> list[Record]:
        """The base row (sample 0: the first base answer given), the other base samples as
        replays, then the variants, each paired with the base sample of its own row."""
        order = sorted(
            range(len(self.samples)), key=lambda i: not _text(self.samples[i][1]).strip()
        )
        common = {"model": self.model, "dataset": self.dataset, "prompt_id": self.prompt_id}
        out = []
        sample_ids: dict[int, str] = {}
        for k, index in enumerate(order[:1] + sorted(order[1:])):
            text, answer, row = self.samples[index]
            variant: Record = {"variant_id": BASE_VARIANT_ID}
            if k:
                key = VariantKey(REPLAY_FAMILY, BASE_FAMILY, float(k), "global")
                variant = {"variant_id": variant_id_of(key), "family": REPLAY_FAMILY}
                variant |= {"subtype": BASE_FAMILY, "strength": float(k), "position": "global"}
            sample_ids[index] = variant["variant_id"]
            out.append(
                {"__row__": row, **common, **variant, "prompt_text": text, "response_text": answer}
            )
        variants = [
            {k: v for k, v in r.items() if k != _SAMPLE} | {PAIRED_BASE: sample_ids[r[_SAMPLE]]}
            for r in self.variants.values()
        ]
        return out + variants


def _variant(
    record: Record, family: str, subtype: str, strength: float, file: str, row: int
) -> Record:
    key = VariantKey(family, subtype, strength, _place(record, file, row))
    return {
        "variant_id": variant_id_of(key),
        "family": family,
        "subtype": subtype,
        "strength": strength,
        "position": key.position,
    }


def _add_row(prompt: _Prompt, record: Record, run: Run, file: str, row: int) -> bool:
    """Adds one row to its prompt; True when its variant prompt is the base unchanged (and
    not at the family's baseline): read as the base asked again."""
    base_text, pert = _text(record["prompt_orig"]), _text(record["prompt_pert"])
    own_base = len(prompt.samples)  # the base answer asked on this row
    prompt.samples.append((base_text, record["response_orig"], row))
    strength = _strength(record, run.subtype, base_text, file, row)
    unchanged = pert == base_text
    if strength == baseline_of(run.subtype) or unchanged:
        prompt.samples.append((pert, record["response_pert"], row))
        return unchanged and strength != baseline_of(run.subtype)
    variant = _variant(record, run.family, run.subtype, strength, file, row)
    first = prompt.variants.get(variant["variant_id"])
    if first is not None:
        raise InputError(
            f"two rows give variant {variant['variant_id']!r} of prompt {prompt.prompt_id!r} "
            f"({run.model}, {run.dataset}): rows {first['__row__']} and {row}",
            file=file,
            row=row,
            column="strength",
        )
    prompt.variants[variant["variant_id"]] = {
        "__row__": row,
        "model": prompt.model,
        "dataset": prompt.dataset,
        "prompt_id": prompt.prompt_id,
        **variant,
        "prompt_text": pert,
        "response_text": record["response_pert"],
        _SAMPLE: own_base,
    }
    return False


def _notes(
    prompts: list[_Prompt], runs: list[Run], left_out: int, unchanged: int
) -> dict[str, int]:
    counts = [len(p.samples) for p in prompts]
    notes = {
        SEVERAL_BASES: sum(
            len({_text(a).strip() for _, a, _ in p.samples if _text(a).strip()}) > 1
            for p in prompts
        )
    }
    if counts and min(counts) == max(counts):
        notes[BASE_ANSWERS] = counts[0]
    elif counts:
        notes[f"{BASE_ANSWERS}, fewest"], notes[f"{BASE_ANSWERS}, most"] = min(counts), max(counts)
    if unchanged:
        notes[UNCHANGED] = unchanged
    if len(runs) > 1 or left_out:
        notes[RUNS_READ], notes[LEFT_OUT] = len(runs), left_out
    return notes


def runs_of(
    records: list[Record], source: ExternalSource, file: str
) -> tuple[list[Run], list[Duplicate]]:
    """The runs kept (one per model, dataset and family) and the repeats left out."""
    return choose_runs(_runs(records, source, file))


def to_input_schema(
    records: list[Record], source: ExternalSource, file: str
) -> tuple[list[Record], dict[str, int]]:
    runs, duplicates = runs_of(records, source, file)
    prompts: dict[tuple[str, str, str], _Prompt] = {}
    unchanged = 0
    for run in runs:
        for index in run.rows:
            record, row = records[index], index + 1
            require_columns(record, REQUIRED, file, row)
            dataset = run.dataset
            if _dataset_of_run(record, file) is None:
                dataset = str(record.get("category") or "").strip() or Path(file).stem
            prompt_id = str(record["prompt_id"]).strip()
            base_text = _text(record["prompt_orig"])
            prompt = prompts.setdefault(
                (run.model, dataset, prompt_id),
                _Prompt(run.model, dataset, prompt_id, base_text, row),
            )
            if base_text != prompt.text:
                raise InputError(
                    f"base prompt of {prompt_id!r} ({run.model}, {dataset}) differs from the "
                    f"one at row {prompt.row}: one prompt id, one base prompt",
                    file=file,
                    row=row,
                    column="prompt_orig",
                )
            unchanged += _add_row(prompt, record, run, file, row)
    out = [r for p in prompts.values() for r in p.records()]
    left_out = sum(len(d.left_out) for d in duplicates)
    return out, _notes(list(prompts.values()), runs, left_out, unchanged)
