"""The SAGO reference code's result CSVs -> rows of the input schema.

Columns: ``model, prompt_id, place, strength, category, prompt_orig, prompt_pert,
response_orig, response_pert`` (others are ignored). One row holds a base and a variant and is
scored as the pair it records: ``response_pert`` against its own ``response_orig``. That code
regenerated the base answer per strength bucket, so one prompt can have several base
answers; each distinct (base prompt, base answer) of a prompt becomes its own prompt,
``<prompt_id>~<k>`` (k = 1, 2, ... in file order), and the count of such prompts is noted
(``prompts with several base answers``). Rows at strength 0 (the base prompt asked again)
are the noise-floor replay, never variants.

The family is not in the file (the reference code names it only in the folder): ``--family``
and ``--subtype``, else the parent folder's name (``politeness``, ``spacing``,
``punctuation``, ``capitalization``, ``length``, ``mood``). ``place`` is the position
(``prefix``/``suffix``/``global``; ``start``, ``end``, ``all`` are read as those);
``category`` is the dataset (the file's stem when empty).
"""

from __future__ import annotations

from pathlib import Path

from sago_core.errors import InputError
from sago_core.external.columns import Record, require_columns
from sago_core.external.options import ExternalSource
from sago_core.external.schema import VariantKey, variant_id_of
from sago_core.vocabulary import BASE_VARIANT_ID, REPLAY_VARIANT_ID

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
FOLDER_FAMILIES = {
    "politeness": ("register", "politeness"),
    "register": ("register", "politeness"),
    "spacing": ("noise", "spacing"),
    "punctuation": ("noise", "punctuation"),
    "capitalization": ("noise", "capitalization"),
    "length": ("structural", "length"),
    "mood": ("structural", "mood"),
}
PLACES = {
    "prefix": "prefix",
    "suffix": "suffix",
    "global": "global",
    "start": "prefix",
    "end": "suffix",
    "all": "global",
}
SEVERAL_BASES = "prompts with several base answers"


def family_of(source: ExternalSource, file: str) -> tuple[str, str]:
    folder = Path(file).parent.name.lower()
    default = FOLDER_FAMILIES.get(folder)
    family = source.family or (default[0] if default else None)
    subtype = source.subtype or (default[1] if default and default[0] == family else None)
    if family is None or subtype is None:
        raise InputError(
            f"the reference CSVs name the variant family only in their folder ({folder!r} is "
            f"none of {sorted(FOLDER_FAMILIES)}): give --family and --subtype",
            file=file,
        )
    return family, subtype


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


def _strength(record: Record, file: str, row: int) -> float:
    try:
        return float(record.get("strength"))  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise InputError(
            f"{record.get('strength')!r} is not a number", file=file, row=row, column="strength"
        ) from exc


def to_input_schema(
    records: list[Record], source: ExternalSource, file: str
) -> tuple[list[Record], dict[str, int]]:
    family, subtype = family_of(source, file)
    dataset_default = Path(file).stem
    bases: dict[tuple[str, str, str], list[tuple[str, str]]] = {}  # (model, dataset, id) -> bases
    out: list[Record] = []
    emitted: set[tuple[str, str, str]] = set()
    for row, record in enumerate(records, start=1):
        require_columns(record, REQUIRED, file, row)
        model = record.get("model") or source.model
        dataset = str(record.get("category") or "").strip() or dataset_default
        prompt_id = str(record["prompt_id"]).strip()
        seen = bases.setdefault((str(model), dataset, prompt_id), [])
        base = (str(record["prompt_orig"]), str(record["response_orig"] or ""))
        if base not in seen:
            seen.append(base)
        k = seen.index(base) + 1
        common = {
            "__row__": row,
            "model": model,
            "dataset": dataset,
            "k": k,
            "prompt_id": prompt_id,
        }
        key = (str(model), dataset, f"{prompt_id}~{k}")
        if key not in emitted:
            emitted.add(key)
            out.append(
                {
                    **common,
                    "variant_id": BASE_VARIANT_ID,
                    "prompt_text": record["prompt_orig"],
                    "response_text": record["response_orig"],
                }
            )
        strength = _strength(record, file, row)
        if strength == 0:
            variant: Record = {"variant_id": REPLAY_VARIANT_ID}
        else:
            key_v = VariantKey(family, subtype, strength, _place(record, file, row))
            variant = {
                "variant_id": variant_id_of(key_v),
                "family": family,
                "subtype": subtype,
                "strength": strength,
                "position": key_v.position,
            }
        out.append(
            {
                **common,
                **variant,
                "prompt_text": record["prompt_pert"],
                "response_text": record["response_pert"],
            }
        )
    several = {k for k, v in bases.items() if len(v) > 1}
    for record in out:
        group = (str(record["model"]), record["dataset"], record["prompt_id"])
        k = record.pop("k")
        if group in several:
            record["prompt_id"] = f"{record['prompt_id']}~{k}"
    return out, {SEVERAL_BASES: len(several)}
