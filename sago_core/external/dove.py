"""DOVE / PromptSuite Parquet -> rows of the input schema.

A row is one response to one prompt variant: ``model`` (a name, or a struct with
``model_info.name``), ``instance`` (``sample_identifier``, ``raw_input`` as text or chat
messages, optional ``classification_fields.ground_truth``), ``output`` (``response``,
optional ``generated_tokens_ids``) and ``prompt_config.dimensions`` (the prompt-format
choices this variant made: enumerator, separator, choice order, instruction phrasing...).
Variants are grouped by model and ``sample_identifier`` (dataset = its ``dataset_name``,
prompt id = its ``hf_index`` or, without one, the identifier itself).

The base of a group, by rule: the row whose dimensions equal the file's default
configuration, each dimension at its most frequent value across the file (ties: the
smallest value as text); ``--base-where dim=value,...`` picks it instead. A group with no
such row, or several, is an error naming it: a base is never guessed.

DOVE's dimensions are not SAGO families, so ``--family`` names one (``--subtype`` too, else
the names of the dimensions that differ from the base, joined by ``+``); strength is the
number of dimensions that differ; position ``global``. The variant id lists the differing
dimensions: ``dove:enumerator=A|shuffle=True``.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from sago_core.errors import InputError
from sago_core.external.columns import Record, require_columns
from sago_core.external.options import ExternalSource
from sago_core.vocabulary import BASE_VARIANT_ID

REQUIRED = ("instance", "output", "prompt_config")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def _dimensions(record: Record, file: str, row: int) -> dict[str, str]:
    config = record.get("prompt_config")
    dims = config.get("dimensions") if isinstance(config, dict) else None
    if not isinstance(dims, dict):
        raise InputError(
            "has no dimensions struct", file=file, row=row, column="prompt_config.dimensions"
        )
    return {str(k): _text(v) for k, v in dims.items() if v is not None}


def _model(record: Record) -> str | None:
    model = record.get("model")
    if isinstance(model, dict):
        info = model.get("model_info")
        name = info.get("name") if isinstance(info, dict) else model.get("name")
        return str(name) if name else None
    return str(model) if model else None


def _prompt(instance: dict[str, Any], file: str, row: int) -> Any:
    raw = instance.get("raw_input")
    if isinstance(raw, list):  # chat messages: the last user turn
        users = [m.get("content") for m in raw if isinstance(m, dict) and m.get("role") == "user"]
        return users[-1] if users else None
    return raw


def _sample(instance: dict[str, Any], file: str, default_dataset: str) -> tuple[str, str]:
    ident = instance.get("sample_identifier")
    if isinstance(ident, dict):
        dataset = str(ident.get("dataset_name") or default_dataset)
        index = ident.get("hf_index")
        return dataset, str(index) if index is not None else _text(ident)
    return default_dataset, _text(ident)


def _references(instance: dict[str, Any]) -> list[str]:
    fields = instance.get("classification_fields")
    truth = fields.get("ground_truth") if isinstance(fields, dict) else instance.get("ground_truth")
    if truth is None:
        return []
    if isinstance(truth, dict):
        truth = truth.get("text") or truth.get("id")
    return [str(truth)] if truth is not None else []


def default_configuration(dimensions: list[dict[str, str]]) -> dict[str, str]:
    """Each dimension at its most frequent value across the file (ties: smallest text)."""
    counts: dict[str, Counter[str]] = {}
    for dims in dimensions:
        for key, value in dims.items():
            counts.setdefault(key, Counter())[value] += 1
    return {k: min(c, key=lambda v: (-c[v], v)) for k, c in counts.items()}


def to_input_schema(
    records: list[Record], source: ExternalSource, file: str
) -> tuple[list[Record], dict[str, int]]:
    if source.family is None:
        raise InputError(
            "DOVE rows carry no SAGO variant family: give --family (and --subtype)", file=file
        )
    parsed = []
    for row, record in enumerate(records, start=1):
        require_columns(record, REQUIRED, file, row)
        instance, output = record["instance"], record["output"]
        if not isinstance(instance, dict) or not isinstance(output, dict):
            raise InputError(
                "instance and output must be structs", file=file, row=row, column="instance"
            )
        dataset, prompt_id = _sample(instance, file, Path(file).stem)
        parsed.append(
            {
                "row": row,
                "model": _model(record) or source.model,
                "dataset": dataset,
                "prompt_id": prompt_id,
                "dims": _dimensions(record, file, row),
                "prompt_text": _prompt(instance, file, row),
                "response_text": output.get("response"),
                "response_token_ids": output.get("generated_tokens_ids"),
                "references": _references(instance),
            }
        )
    wanted = dict(source.base_where) or default_configuration([p["dims"] for p in parsed])
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for p in parsed:
        groups.setdefault((str(p["model"]), p["dataset"], p["prompt_id"]), []).append(p)
    out: list[Record] = []
    for (model, dataset, prompt_id), members in groups.items():
        bases = [p for p in members if all(p["dims"].get(k) == v for k, v in wanted.items())]
        if len(bases) != 1:
            rows = [p["row"] for p in bases] or [p["row"] for p in members]
            raise InputError(
                f"sample {prompt_id!r} of {dataset!r} (model {model!r}) has {len(bases)} rows "
                f"with the base configuration {wanted} (rows {rows}); choose it with --base-where",
                file=file,
                row=rows[0],
                column="prompt_config.dimensions",
            )
        base = bases[0]
        for p in members:
            out_row: Record = {
                "__row__": p["row"],
                "model": p["model"],
                "dataset": dataset,
                "prompt_id": prompt_id,
                "prompt_text": p["prompt_text"],
                "response_text": p["response_text"],
                "response_token_ids": p["response_token_ids"],
                "references": p["references"],
            }
            if p is base:
                out.append({**out_row, "variant_id": BASE_VARIANT_ID})
                continue
            changed = sorted(
                k
                for k in set(p["dims"]) | set(base["dims"])
                if p["dims"].get(k) != base["dims"].get(k)
            )
            label = "|".join(f"{k}={p['dims'].get(k)}" for k in changed) or "same"
            out.append(
                {
                    **out_row,
                    "variant_id": f"dove:{label}",
                    "family": source.family,
                    "subtype": source.subtype or "+".join(changed) or "same",
                    "strength": float(len(changed)),
                    "position": "global",
                }
            )
    return out, {}
