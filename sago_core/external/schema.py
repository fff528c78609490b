"""The input schema of ``sago score``: one row per response (the table of its columns is in
docs/tutorials/score-generations.md, "Input schema").

Required: ``dataset``, ``prompt_id``, ``variant_id`` (``base`` for the base prompt),
``prompt_text``, ``response_text``; ``family``, ``subtype``, ``strength`` and ``position``
unless the variant id is in sago's own form (``register:+6:prefix``), which carries them and
which explicit columns must agree with. ``paired_base`` names, where the file asks the base
again beside each variant (the SAGO reference CSVs do), the base sample the variant is
compared with (``base`` or a replay of the same prompt); blank: the ``base`` row.
"""

from __future__ import annotations

from dataclasses import dataclass

from sago_core.artifacts.schemas import PAIRED_BASE
from sago_core.config import ALL_POSITIONS
from sago_core.registry.families import families
from sago_core.vocabulary import BASE_FAMILY, BASE_VARIANT_ID, REPLAY_FAMILY, VARIANT_COLUMNS

REQUIRED = ("dataset", "prompt_id", "variant_id", "prompt_text", "response_text")
OPTIONAL = (
    *VARIANT_COLUMNS,
    "model",
    "references",
    "response_token_ids",
    "failure_reason",
    PAIRED_BASE,
)
COLUMNS = (*REQUIRED, *OPTIONAL)
TEMPLATE_FAMILY = "template"
FEWSHOT_FAMILY = "fewshot"
# The families of other tools' files (sago's own are its registry's, ``known_families``); a
# subtype outside these is kept and its mirroring is missing with the detector's reason.
OTHER_FAMILIES: dict[str, tuple[str, ...]] = {
    # other tools' prompt-format dimensions (DOVE's, lm-eval's tasks, inspect's templates):
    # a template's subtype names what changed (``enumerator``, ``separator+shots``, ...)
    TEMPLATE_FAMILY: ("template", "enumerator", "separator", "choices_order", "phrasing"),
    FEWSHOT_FAMILY: ("shots", "demonstrations"),  # strength: the demonstrations' number
    REPLAY_FAMILY: (BASE_FAMILY,),
}
POSITIONS: tuple[str, ...] = ALL_POSITIONS
DEFAULT_MODEL = "external"
EMPTY_RESPONSE = "empty response in the input file"


@dataclass(frozen=True)
class VariantKey:
    family: str
    subtype: str
    strength: float
    position: str


@dataclass(frozen=True)
class ExternalRow:
    """One validated response; ``variant`` is None for the base."""

    source: str  # "<file>:<row>"
    model: str
    dataset: str
    prompt_id: str
    variant_id: str
    variant: VariantKey | None
    prompt_text: str
    response_text: str | None  # None: failed or empty in the file (``failure_reason`` says)
    failure_reason: str | None
    references: tuple[str, ...]
    response_token_ids: tuple[int, ...] | None
    # the base sample this variant's answer is compared with (None: the ``base`` row)
    paired_base: str | None = None

    @property
    def is_base(self) -> bool:
        return self.variant_id == BASE_VARIANT_ID


def variant_id_of(key: VariantKey) -> str:
    """sago's own id for a variant (the inverse of ``parse_variant_id``)."""
    if key.family == "register":
        return f"register:{key.strength:+g}:{key.position}"
    return f"{key.family}:{key.subtype}:{key.strength:g}:{key.position}"


def known_families() -> dict[str, tuple[str, ...]]:
    """Family -> subtypes: sago's registered families (plug-ins' included), then other tools'."""
    return {**{f.name: f.subtypes for f in families()}, **OTHER_FAMILIES}


def parse_variant_id(variant_id: str) -> tuple[str, str, str, str] | None:
    """(family, subtype, strength, position) texts of a sago-style id, else None."""
    parts = variant_id.split(":")
    if len(parts) == 3 and parts[0] == "register":
        return "register", "politeness", parts[1], parts[2]
    if len(parts) == 4 and parts[0] in known_families():
        return parts[0], parts[1], parts[2], parts[3]
    return None
