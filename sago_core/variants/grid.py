"""Expand each prompt into its grid of variants: v = (family, subtype, strength, position).

A variant id is readable and stable (``register:+6:prefix``, ``noise:spacing:20:global``);
the base prompt itself (strength 0) is never a variant, except as the ``replay`` row that
measures the noise floor (the same text asked again). Noise randomness is seeded from
(run seed, dataset, prompt_id, variant id), so the text never depends on order or sharding.
The script family (``script:homoglyph:25:prefix``, ``script:romanize_pinyin:100:global``)
is seeded the same way; a script transform that would leave a prompt unchanged (homoglyphs
in Arabic, romanising English) builds no variant for that prompt. The language family
(``language:de:100:global``, variants/language.py) is the file's own translation of the
prompt; a prompt its file gives no text in a language builds no variant in it (logged,
with the reader's reason).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from sago_core.config import Position, ScriptGrid, VariantGrid
from sago_core.data.prompt import Prompt
from sago_core.registry.families import family_spec
from sago_core.variants.language import (
    LANGUAGE_STRENGTH,
    LanguageTexts,
    language_variant_id,
    read_language_texts,
    report_missing,
)
from sago_core.variants.noise import add_punctuation, add_spaces, capitalize_share
from sago_core.variants.register import apply_register
from sago_core.variants.romanization import convert_han, romanize
from sago_core.variants.script import (
    add_diacritics,
    strip_diacritics,
    to_fullwidth,
    to_homoglyphs,
)
from sago_core.variants.seeding import variant_rng, variant_seed
from sago_core.vocabulary import BASE_FAMILY, LANGUAGE_FAMILY, REPLAY_FAMILY, REPLAY_VARIANT_ID

NoiseFn = Callable[[str, int, Position, random.Random], str]
NOISE_BUILDERS: dict[str, NoiseFn] = {
    "spacing": add_spaces,
    "punctuation": add_punctuation,
    "capitalization": capitalize_share,
}
# The script family's percent ladders (its whole-prompt transforms name their own subtypes).
SCRIPT_BUILDERS: dict[str, NoiseFn] = {
    "fullwidth": to_fullwidth,
    "homoglyph": to_homoglyphs,
    "diacritics_added": add_diacritics,
    "diacritics_stripped": strip_diacritics,
}


@dataclass(frozen=True)
class Variant:
    dataset: str
    prompt_id: str
    variant_id: str
    family: str
    subtype: str
    strength: float
    position: Position
    text: str
    seed: int


def _variant(
    prompt: Prompt,
    seed: int,
    variant_id: str,
    family: str,
    subtype: str,
    strength: float,
    position: Position,
    text: str,
) -> Variant:
    """A variant of ``prompt``, its seed drawn from the run's ``seed`` and its id."""
    vseed = variant_seed(seed, prompt.dataset, prompt.prompt_id, variant_id)
    key = (prompt.dataset, prompt.prompt_id, variant_id)
    return Variant(*key, family, subtype, float(strength), position, text, vseed)


def _replay_variant(prompt: Prompt, grid: VariantGrid, seed: int) -> Iterator[Variant]:
    if grid.replay:
        family, text = REPLAY_FAMILY, prompt.prompt  # the base asked again
        yield _variant(prompt, seed, REPLAY_VARIANT_ID, family, BASE_FAMILY, 0.0, "global", text)


def register_variant_id(strength: int, position: Position) -> str:
    return f"register:{strength:+d}:{position}"


def noise_variant_id(subtype: str, strength: int, position: Position) -> str:
    return f"noise:{subtype}:{strength}:{position}"


def script_variant_id(subtype: str, strength: int, position: Position) -> str:
    return f"script:{subtype}:{strength}:{position}"


def _register_variants(prompt: Prompt, grid: VariantGrid, seed: int) -> Iterator[Variant]:
    if grid.register_grid is None:
        return
    for position in grid.register_grid.positions:
        for strength in grid.register_grid.strengths:
            text = apply_register(prompt.prompt, strength, position)
            vid = register_variant_id(strength, position)
            yield _variant(prompt, seed, vid, "register", "politeness", strength, position, text)


def _ladders(
    prompt: Prompt,
    seed: int,
    family: str,
    levels: dict[str, tuple[int, ...]],
    positions: tuple[Position, ...],
    builders: dict[str, NoiseFn],
    make_id: Callable[[str, int, Position], str],
) -> Iterator[Variant]:
    """Every (subtype, position, strength) cell of a family whose subtypes are strength
    ladders, each text built by ``builders[subtype]`` from the variant's own generator."""
    for subtype, strengths in levels.items():
        for position in positions:
            for strength in strengths:
                vid = make_id(subtype, strength, position)
                rng = variant_rng(variant_seed(seed, prompt.dataset, prompt.prompt_id, vid))
                text = builders[subtype](prompt.prompt, strength, position, rng)
                yield _variant(prompt, seed, vid, family, subtype, strength, position, text)


def _noise_variants(prompt: Prompt, grid: VariantGrid, seed: int) -> Iterator[Variant]:
    if grid.noise is None:
        return
    levels = {
        "spacing": grid.noise.spacing,
        "punctuation": grid.noise.punctuation,
        "capitalization": grid.noise.capitalization,
    }
    yield from _ladders(
        prompt, seed, "noise", levels, grid.noise.positions, NOISE_BUILDERS, noise_variant_id
    )


def _script_levels(grid: ScriptGrid) -> dict[str, tuple[int, ...]]:
    return {
        "fullwidth": grid.fullwidth,
        "homoglyph": grid.homoglyphs,
        "diacritics_added": grid.diacritics_added,
        "diacritics_stripped": grid.diacritics_stripped,
    }


def _script_variants(prompt: Prompt, grid: VariantGrid, seed: int) -> Iterator[Variant]:
    script = grid.script
    if script is None:
        return
    levels, positions = _script_levels(script), script.positions
    for variant in _ladders(
        prompt, seed, "script", levels, positions, SCRIPT_BUILDERS, script_variant_id
    ):
        if variant.text != prompt.prompt:
            yield variant
    # Whole-prompt transforms: GLOBAL, strength 100, the subtype names the method used.
    for wanted, transform in ((script.romanized, romanize), (script.han_converted, convert_han)):
        done = transform(prompt.prompt) if wanted else None
        if done is None or done.text == prompt.prompt:
            continue
        vid = script_variant_id(done.subtype, 100, "global")
        yield _variant(prompt, seed, vid, "script", done.subtype, 100.0, "global", done.text)


def _language_variants(prompt: Prompt, texts: LanguageTexts | None, seed: int) -> Iterator[Variant]:
    if texts is None:
        return
    found = texts.texts.get((prompt.dataset, prompt.prompt_id), {})
    for code in texts.languages:
        if code in found:
            vid = language_variant_id(code)
            yield _variant(
                prompt, seed, vid, LANGUAGE_FAMILY, code, LANGUAGE_STRENGTH, "global", found[code]
            )


def _declared_variants(prompt: Prompt, grid: VariantGrid, seed: int) -> Iterator[Variant]:
    """The families built from their declarations (registry/families.py), each cell once."""
    for name, cells in grid.families.items():
        transform = family_spec(name).transformer()
        assert cells.subtypes and cells.strengths and cells.positions  # resolved by the config
        for subtype in cells.subtypes:
            for position in cells.positions:
                for strength in cells.strengths:
                    vid = f"{name}:{subtype}:{strength:g}:{position}"
                    rng = variant_rng(variant_seed(seed, prompt.dataset, prompt.prompt_id, vid))
                    text = transform(prompt.prompt, subtype, strength, position, rng)
                    if text != prompt.prompt:
                        yield _variant(prompt, seed, vid, name, subtype, strength, position, text)


def build_variants(prompts: list[Prompt], grid: VariantGrid, seed: int) -> list[Variant]:
    """Every configured variant of every prompt, in a stable order."""
    texts = None if grid.language is None else read_language_texts(grid.language)
    if texts is not None:
        report_missing(texts, [(p.dataset, p.prompt_id) for p in prompts])
    variants: list[Variant] = []
    for prompt in prompts:
        variants.extend(_register_variants(prompt, grid, seed))
        variants.extend(_noise_variants(prompt, grid, seed))
        variants.extend(_script_variants(prompt, grid, seed))
        variants.extend(_language_variants(prompt, texts, seed))
        variants.extend(_declared_variants(prompt, grid, seed))
        variants.extend(_replay_variant(prompt, grid, seed))
    return variants
