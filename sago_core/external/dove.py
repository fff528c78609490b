"""DOVE / PromptSuite records -> rows of the input schema.

The two layouts SLAB-NLP/DOVE publishes (``src/schema_validation/schema.json``): nested
records (``model``, ``instance``, ``output``, ``prompt_config.dimensions``) and DOVE_Lite's
flat columns (``"dimensions_1: enumerator"`` ...). docs/tutorials/score-generations.md
("DOVE / PromptSuite") says what each field becomes. Variants are grouped by model, dataset
and sample; a group's base is each dimension at its most frequent value across the file (or
the group's own where no row has it), or the row ``--base-where`` picks: never guessed, a
group without exactly one base is an error naming its rows. A variant differing in shots or
demonstrations only is ``fewshot``, any other ``template`` with the differing dimensions as
its subtype; its id lists them with readable labels (colliding labels get 8 hex digits of
their value's SHA-256). ``cumulative_logprob`` scores each row's own response under its own
prompt, no SAGO axis: it is checked and counted, and Prob and Ent need ``--model``.
"""

from __future__ import annotations

import ast
import hashlib
import itertools
import json
import math
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

from sago_core.errors import ConfigError, InputError
from sago_core.external.columns import Record, hint, require_columns
from sago_core.external.options import ExternalSource
from sago_core.external.schema import FEWSHOT_FAMILY, TEMPLATE_FAMILY
from sago_core.vocabulary import BASE_VARIANT_ID

REQUIRED = ("instance", "output", "prompt_config")
LITE_REQUIRED = ("dataset", "sample_index", "raw_input", "generated_text")
LITE_DIMENSION_PREFIX = "dimensions_"
MAX_LABEL_CHARS = 64
SHOTS = "shots"
FEWSHOT_DIMENSIONS = {SHOTS, "demonstrations"}  # the rest are the template's format
TOKENS_FROM_LOGPROBS = "DOVE rows whose token ids come from generated_tokens_logprobs"
CUMULATIVE_LOGPROB = (
    "DOVE rows with a cumulative_logprob (own response under own prompt: no SAGO axis)"
)


def is_lite(columns: set[str]) -> bool:
    return set(LITE_REQUIRED) <= columns and any(
        c.startswith(LITE_DIMENSION_PREFIX) for c in columns
    )


def _struct(value: Any, file: str, row: int, column: str, required: bool = True) -> Any:
    """A nested field: a struct (dict) or list as read, or JSON text of one (DOVE's CSV)."""
    bad = partial(InputError, file=file, row=row, column=column)
    if isinstance(value, str) and value.strip()[:1] in ("{", "["):
        text = value.strip()
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            try:  # a CSV written from Python dicts holds their repr
                value = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                raise bad(f"is neither a struct nor JSON text of one: {exc.msg}") from exc
    if value is None and not required:
        return None
    if not isinstance(value, dict):
        raise bad(f"must be a struct (or JSON text of one), got {type(value).__name__}")
    return value


def canonical(value: Any) -> str:
    """The identity of a dimension value: text as is, anything else as sorted JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # a Parquet column with nulls reads 0 as 0.0
    return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)


def _short(text: str) -> str:
    shown = text.replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")
    if len(shown) > MAX_LABEL_CHARS:
        return " ".join(shown[: MAX_LABEL_CHARS - 3].split()) + "..."
    return shown


def label(value: Any) -> str:
    """A readable name of a dimension value (see the module doc)."""
    if isinstance(value, str):
        return _short(value)
    if isinstance(value, dict):
        for key in ("name", "method"):
            if isinstance(value.get(key), str) and value[key]:
                return _short(value[key])
        methods = value.get("methods")
        if isinstance(methods, list) and methods and all(isinstance(m, str) for m in methods):
            return _short("+".join(methods))
        return _short(canonical(value))
    if isinstance(value, list):
        if not value:
            return "none"
        if all(isinstance(v, str | int | float) and not isinstance(v, bool) for v in value):
            return _short("+".join(canonical(v) for v in value))
        return f"{len(value)} items"
    return _short(canonical(value))


def _unescape(text: str) -> str:
    return text.replace("\\n", "\n").replace("\\t", "\t").replace("\\r", "\r")


def matches(value: Any, wanted: str, field: str | None = None) -> bool:
    """Whether a dimension value is the one ``--base-where`` names (see the module doc)."""
    if field is not None:
        value = value.get(field) if isinstance(value, dict) else None
        if value is None:
            return False
    texts = {canonical(value), label(value)}
    return wanted in texts or _unescape(wanted) in texts


def parse_base_where(text: str | None) -> tuple[tuple[str, str], ...]:
    """``dim=value,dim=value``; a value keeps its spaces (``separator=; ``) and may hold
    commas (``separator=, ``): an item ends only at a comma that starts ``name=``."""
    if text is None or not text.strip():
        return ()
    starts = [0]
    for i, char in enumerate(text):
        if char == "," and _starts_item(text[i + 1 :]):
            starts.append(i + 1)
    items = [text[a : b - 1] for a, b in itertools.pairwise(starts)]
    items.append(text[starts[-1] :])
    pairs: list[tuple[str, str]] = []
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key or value == "":
            raise ConfigError(f"--base-where: {item!r} is not DIMENSION=VALUE")
        if key in dict(pairs):
            raise ConfigError(f"--base-where: {key!r} is named twice")
        pairs.append((key, value))
    return tuple(pairs)


def _starts_item(rest: str) -> bool:
    key, sep, _ = rest.partition("=")
    key = key.strip()
    return bool(sep) and bool(key) and all(c.isalnum() or c in "_.: " for c in key)


def _model(value: Any, file: str, row: int) -> str | None:
    if isinstance(value, str) and value.strip().startswith("{"):
        value = _struct(value, file, row, "model")
    if isinstance(value, dict):
        info = value.get("model_info")
        name = info.get("name") if isinstance(info, dict) else value.get("name")
        return str(name) if name else None
    return str(value) if value else None


def _prompt(instance: dict[str, Any]) -> Any:
    raw = instance.get("raw_input")
    if isinstance(raw, list):  # chat messages: the last user turn
        users = [m.get("content") for m in raw if isinstance(m, dict) and m.get("role") == "user"]
        return users[-1] if users else None
    return raw


def _index_text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip() if isinstance(value, str) else canonical(value)


def _sample(instance: dict[str, Any], default_dataset: str) -> tuple[str, str]:
    ident = instance.get("sample_identifier")
    if isinstance(ident, dict):
        dataset = str(ident.get("dataset_name") or default_dataset)
        index = ident.get("hf_index")
        return dataset, _index_text(index) if index is not None else canonical(ident)
    return default_dataset, canonical(ident)


def _references(instance: dict[str, Any]) -> list[str]:
    fields = instance.get("classification_fields")
    truth = fields.get("ground_truth") if isinstance(fields, dict) else instance.get("ground_truth")
    if truth is None:
        return []
    if isinstance(truth, dict):
        truth = truth.get("text") or truth.get("id")
    return [str(truth)] if truth is not None else []


def _logprob(value: Any, file: str, row: int, column: str) -> float | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    bad = partial(InputError, file=file, row=row, column=column)
    try:
        number = float(value)
    except (TypeError, ValueError) as exc:
        raise bad(f"{value!r} is not a number") from exc
    if math.isnan(number) or number > 0:
        raise bad(f"{value!r} is not a log-probability (a number <= 0)")
    return number


def token_ids_from_logprobs(steps: Any, response: Any) -> list[int] | None:
    """The response's token ids from ``generated_tokens_logprobs`` (one list of
    ``{token_id, logprob, rank, decoded_token}`` per generated token): at each step the one
    candidate whose decoded token continues the response; None unless that spells the
    response exactly (then the scoring model tokenises the text)."""
    if not isinstance(steps, list) or not steps or not isinstance(response, str):
        return None
    ids: list[int] = []
    at = 0
    for step in steps:
        if step is None or isinstance(step, str):
            continue  # the schema allows a null / text placeholder
        if not isinstance(step, list):
            return None
        fits = {
            (int(c["token_id"]), c["decoded_token"])
            for c in step
            if isinstance(c, dict)
            and isinstance(c.get("decoded_token"), str)
            and isinstance(c.get("token_id"), int | float)
            and response.startswith(c["decoded_token"], at)
        }
        if len(fits) != 1:
            return None
        token_id, text = fits.pop()
        ids.append(token_id)
        at += len(text)
    return ids if at == len(response) else None


def _nested(record: Record, file: str, row: int, default_dataset: str) -> dict[str, Any]:
    require_columns(record, REQUIRED, file, row)
    instance = _struct(record["instance"], file, row, "instance")
    output = _struct(record["output"], file, row, "output")
    config = _struct(record["prompt_config"], file, row, "prompt_config")
    dims = config.get("dimensions")
    if not isinstance(dims, dict):
        raise InputError(
            "has no dimensions struct", file=file, row=row, column="prompt_config.dimensions"
        )
    dataset, prompt_id = _sample(instance, default_dataset)
    response = output.get("response")
    steps = output.get("generated_tokens_logprobs")
    return {
        "model": _model(record.get("model"), file, row),
        "dataset": dataset,
        "prompt_id": prompt_id,
        "dims": {str(k): v for k, v in dims.items() if v is not None},
        "prompt_text": _prompt(instance),
        "response_text": response,
        "response_token_ids": token_ids_from_logprobs(steps, response),
        "logprob": _logprob(
            output.get("cumulative_logprob"), file, row, "output.cumulative_logprob"
        ),
        "references": _references(instance),
    }


def _lite(record: Record, file: str, row: int) -> dict[str, Any]:
    require_columns(record, LITE_REQUIRED, file, row)
    dims = {
        key.partition(": ")[2] or key: value
        for key, value in record.items()
        if key.startswith(LITE_DIMENSION_PREFIX) and value is not None and value != ""
    }
    truth = record.get("ground_truth")
    return {
        "model": _model(record.get("model"), file, row),
        "dataset": str(record["dataset"]),
        "prompt_id": _index_text(record["sample_index"]),
        "dims": dims,
        "prompt_text": record["raw_input"],
        "response_text": record["generated_text"],
        "response_token_ids": None,
        "logprob": _logprob(record.get("cumulative_logprob"), file, row, "cumulative_logprob"),
        "references": [str(truth)] if truth not in (None, "") else [],
    }


def _most_frequent(values: list[str]) -> str:
    counts = Counter(values)
    return min(counts, key=lambda v: (-counts[v], v))


def default_configuration(dimensions: list[dict[str, str]]) -> dict[str, str]:
    """Each dimension at its most frequent value (ties: smallest text)."""
    values: dict[str, list[str]] = {}
    for dims in dimensions:
        for key, value in dims.items():
            values.setdefault(key, []).append(value)
    return {k: _most_frequent(v) for k, v in values.items()}


def _group_configuration(members: list[dict[str, Any]], file_default: dict[str, str]) -> dict:
    """The file's default where a member of the group has it, else the group's own most
    frequent value of that dimension."""
    own = default_configuration([p["canon"] for p in members])
    return {
        k: v if any(p["canon"].get(k) == v for p in members) else own[k]
        for k, v in file_default.items()
        if k in own
    }


def _labels(parsed: list[dict[str, Any]]) -> dict[tuple[str, str], str]:
    """(dimension, canonical value) -> its label, disambiguated where two values share one."""
    seen: dict[tuple[str, str], set[str]] = {}
    values: dict[tuple[str, str], Any] = {}
    for p in parsed:
        for key, value in p["dims"].items():
            values[(key, p["canon"][key])] = value
            seen.setdefault((key, label(value)), set()).add(p["canon"][key])
    out = {}
    for (key, canon), value in values.items():
        name = label(value)
        if len(seen[(key, name)]) > 1:
            name = f"{name}@{hashlib.sha256(canon.encode()).hexdigest()[:8]}"
        out[(key, canon)] = name
    return out


def _check_base_where(wanted: tuple[tuple[str, str], ...], known: set[str], file: str) -> None:
    for key, _ in wanted:
        dim = key.partition(".")[0]
        if dim not in known:
            raise InputError(
                f"--base-where names {dim!r}, not a dimension of the file (dimensions: "
                f"{sorted(known)}){hint(dim, known)}",
                file=file,
                column="prompt_config.dimensions",
            )


def _picked(dims: dict[str, Any], where: tuple[tuple[str, str], ...]) -> bool:
    for key, value in where:
        dim, _, field = key.partition(".")
        if dim not in dims or not matches(dims[dim], value, field or None):
            return False
    return True


def _rows_text(rows: list[int], limit: int = 10) -> str:
    shown = ", ".join(str(r) for r in rows[:limit])
    return shown + (f" and {len(rows) - limit} more" if len(rows) > limit else "")


def to_input_schema(
    records: list[Record], source: ExternalSource, file: str
) -> tuple[list[Record], dict[str, int]]:
    present = set().union(*(r.keys() for r in records[:50]))
    lite = is_lite(present) and not set(REQUIRED) <= present
    parsed = []
    for row, record in enumerate(records, start=1):
        p = _lite(record, file, row) if lite else _nested(record, file, row, Path(file).stem)
        p["row"] = row
        p["model"] = p["model"] or source.model
        p["canon"] = {k: canonical(v) for k, v in p["dims"].items()}
        parsed.append(p)
    _check_base_where(source.base_where, {k for p in parsed for k in p["dims"]}, file)
    file_default = default_configuration([p["canon"] for p in parsed])
    labels = _labels(parsed)
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for p in parsed:
        groups.setdefault((str(p["model"]), p["dataset"], p["prompt_id"]), []).append(p)
    out: list[Record] = []
    alone: list[int] = []
    for (model, dataset, prompt_id), members in groups.items():
        if source.base_where:
            wanted: dict[str, str] = dict(source.base_where)
            bases = [p for p in members if _picked(p["dims"], source.base_where)]
        else:
            wanted = _group_configuration(members, file_default)
            bases = [p for p in members if all(p["canon"].get(k) == v for k, v in wanted.items())]
        if len(bases) != 1:
            rows = [p["row"] for p in bases] or [p["row"] for p in members]
            shown = {k: labels.get((k, v), v) for k, v in wanted.items()}
            raise InputError(
                f"sample {prompt_id!r} of {dataset!r} (model {model!r}) has {len(bases)} rows "
                f"with the base configuration {shown} (rows {_rows_text(rows)}); choose it "
                "with --base-where",
                file=file,
                row=rows[0],
                column="prompt_config.dimensions",
            )
        if len(members) == 1:
            alone.append(members[0]["row"])
            continue
        out.extend(_group_rows(members, bases[0], dataset, prompt_id, labels, source))
    if alone:
        raise InputError(
            f"{len(alone)} sample(s) have a base and no variant, nothing to compare (rows "
            f"{_rows_text(alone)}): give each sample its prompt variants, or leave it out",
            file=file,
            row=alone[0],
            column="instance.sample_identifier",
        )
    notes = {
        TOKENS_FROM_LOGPROBS: sum(p["response_token_ids"] is not None for p in parsed),
        CUMULATIVE_LOGPROB: sum(p["logprob"] is not None for p in parsed),
    }
    return out, {k: v for k, v in notes.items() if v}


def _group_rows(
    members: list[dict[str, Any]],
    base: dict[str, Any],
    dataset: str,
    prompt_id: str,
    labels: dict[tuple[str, str], str],
    source: ExternalSource,
) -> list[Record]:
    out: list[Record] = []
    for p in members:
        # DOVE's response is the model's text: an empty one is an empty answer, not a failure
        response = p["response_text"]
        out_row: Record = {
            "__row__": p["row"],
            "model": p["model"],
            "dataset": dataset,
            "prompt_id": prompt_id,
            "prompt_text": p["prompt_text"],
            "response_text": response,
            "failure_reason": None if isinstance(response, str) else "no response in DOVE",
            "response_token_ids": p["response_token_ids"],
            "references": p["references"],
        }
        if p is base:
            out.append({**out_row, "variant_id": BASE_VARIANT_ID})
            continue
        changed = sorted(
            k
            for k in set(p["canon"]) | set(base["canon"])
            if p["canon"].get(k) != base["canon"].get(k)
        )
        name = "|".join(
            f"{k}={labels[(k, p['canon'][k])]}" if k in p["canon"] else f"{k}=absent"
            for k in changed
        )
        family, subtype, strength, position = variant_of(changed, p["dims"], source)
        out.append(
            {
                **out_row,
                "variant_id": f"dove:{name or 'same'}",
                "family": family,
                "subtype": subtype,
                "strength": strength,
                "position": position,
            }
        )
    return out


def variant_of(
    changed: list[str], dims: dict[str, Any], source: ExternalSource
) -> tuple[str, str, float, str]:
    """(family, subtype, strength, position) of a variant whose ``changed`` dimensions differ
    from its base: ``--family``/``--subtype`` where given, else DOVE's own dimensions (see
    the module doc)."""
    subtype = source.subtype or "+".join(changed) or "same"
    if source.family is not None:
        return source.family, subtype, float(len(changed)), "global"
    if changed and set(changed) <= FEWSHOT_DIMENSIONS:
        shots = _shots(dims.get(SHOTS)) if SHOTS in changed else None
        if shots is not None:
            return FEWSHOT_FAMILY, source.subtype or SHOTS, float(shots), "prefix"
        return FEWSHOT_FAMILY, subtype, float(len(changed)), "prefix"
    return TEMPLATE_FAMILY, subtype, float(len(changed)), "global"


def _shots(value: Any) -> int | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return int(number) if number.is_integer() and number >= 0 else None
