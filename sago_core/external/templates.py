"""Items answered under several templates (lm-eval tasks, inspect_ai logs): the base
template's answer becomes the base row and every other template's a variant of it."""

from __future__ import annotations

from typing import Any

from sago_core.errors import InputError
from sago_core.external.columns import Record
from sago_core.external.options import ExternalSource
from sago_core.vocabulary import BASE_VARIANT_ID

# ``--base-where task=NAME`` (or ``template=NAME``) names the base template
BASE_KEYS = ("task", "template")


def choose_base_template(
    source: ExternalSource, templates: list[str], where: str, file: str
) -> str:
    """The template ``--base-where`` names, else the first; ``where``: what holds the
    templates ("the file's", "the logs'")."""
    named = [v for k, v in source.base_where if k in BASE_KEYS]
    if not named:
        return templates[0]
    if named[0] not in templates:
        raise InputError(
            f"--base-where names template {named[0]!r}, not one of {where} {templates}",
            file=file,
            column="task",
        )
    return named[0]


def template_row(row: Record, template: str | None, prefix: str, source: ExternalSource) -> Record:
    """``row`` as the base (``template`` None) or as the variant ``prefix:template``."""
    if template is None:
        return {**row, "variant_id": BASE_VARIANT_ID}
    return variant_row(
        row, f"{prefix}:{template}", source.family, source.subtype or "template", 1.0, "global"
    )


def variant_row(
    row: Record,
    variant_id: str,
    family: str | None,
    subtype: str,
    strength: float,
    position: str,
) -> Record:
    return {
        **row,
        "variant_id": variant_id,
        "family": family,
        "subtype": subtype,
        "strength": strength,
        "position": position,
    }


def refuse_base_only(alone: list[int], items: str, fix: str, file: str) -> None:
    """Items answered under the base template only have nothing to compare: refused, naming
    their rows (``items``: what the format calls them; ``fix``: what to add)."""
    if not alone:
        return
    shown = ", ".join(str(r) for r in alone[:10]) + (" ..." if len(alone) > 10 else "")
    raise InputError(
        f"{len(alone)} {items} have the base template and no other, nothing to compare "
        f"(rows {shown}): {fix}",
        file=file,
        row=alone[0],
        column="task",
    )


def base_of(members: list[dict[str, Any]], base_template: str, item: str, file: str) -> Any:
    """The member answered under the base template; an item without one is refused
    (``item``: how the format names it, e.g. "sample 'q1'")."""
    base = next((p for p in members if p["template"] == base_template), None)
    if base is None:
        raise InputError(
            f"{item} has no answer under the base template {base_template!r} "
            f"(rows {[p['row'] for p in members]})",
            file=file,
            row=members[0]["row"],
            column="task",
        )
    return base
