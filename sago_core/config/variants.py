"""The run configuration's variant sections (``variants``: register, noise, structural,
script, language and machine translation; the grid of ``RunConfig.variants``) and the peer
metrics' POSIX matrix (``RunConfig.posix_matrix``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from sago_core.config.base import StrictModel, check_model_spec
from sago_core.registry import plugins
from sago_core.registry.families import declared_grid_families, family_spec
from sago_core.vocabulary import BASE_LANGUAGE

Position = Literal["prefix", "suffix", "global"]
ALL_POSITIONS: tuple[Position, ...] = ("prefix", "suffix", "global")
RewriteMethod = Literal["rules", "model", "rules_then_model"]
EMBEDDED_REWRITER = "hf:smollm2-135m"


class RegisterGrid(StrictModel):
    """Politeness levels: positive = politer, negative = ruder; 0 is the base prompt."""

    strengths: tuple[int, ...] = (-10, -8, -6, -4, -2, 2, 4, 6, 8, 10)
    positions: tuple[Position, ...] = ALL_POSITIONS

    @field_validator("strengths")
    @classmethod
    def _levels(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        for s in value:
            if s == 0 or s % 2 or not -10 <= s <= 10:
                raise ValueError(f"register strength {s} is not one of -10..-2, 2..10 (even)")
        return value


class NoiseGrid(StrictModel):
    """Surface noise strengths: extra spaces, extra marks, percent of letters upper-cased."""

    spacing: tuple[int, ...] = (1, 5, 20, 50, 100)
    punctuation: tuple[int, ...] = (1, 3, 5, 10, 20)
    capitalization: tuple[int, ...] = (10, 25, 50, 75, 100)
    positions: tuple[Position, ...] = ALL_POSITIONS

    @field_validator("spacing", "punctuation")
    @classmethod
    def _counts(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if any(s < 1 for s in value):
            raise ValueError("noise counts must be >= 1")
        return value

    @field_validator("capitalization")
    @classmethod
    def _percent(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if any(not 1 <= s <= 100 for s in value):
            raise ValueError("capitalization percentages must be within 1..100")
        return value


class StructuralGrid(StrictModel):
    """Length scaling (target words = round(words x m)) and question <-> imperative.

    Produced by ``rewriter`` (a model spec; the embedded model by default) at T=0 and
    cached by (rewriter identity, instruction version, prompt), or by the rule-based
    rewriter (``sago_core/variants/structural_rules.py``) as ``method`` says: ``rules``
    (the rules alone; a prompt they cannot rewrite, another language's among them, is
    recorded as not rewritten with why), ``model`` (the rewriter alone) or
    ``rules_then_model`` (the rewriter for what the rules leave). Unset, ``rules`` with
    the embedded rewriter (too small to rewrite: it kept none of its demo rewrites) and
    ``model`` with any rewriter a user names. GLOBAL position only.
    """

    lengths: tuple[float, ...] = (0.25, 0.5, 1.5, 2.0, 3.0)
    mood: bool = True
    rewriter: str = EMBEDDED_REWRITER
    method: RewriteMethod = "rules"
    max_new_tokens: int = Field(default=96, ge=8, le=1024)
    batch_size: int = Field(default=16, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _default_method(cls, data: Any) -> Any:
        if isinstance(data, dict) and "method" not in data:
            named = data.get("rewriter", EMBEDDED_REWRITER) != EMBEDDED_REWRITER
            return {**data, "method": "model" if named else "rules"}
        return data

    @field_validator("lengths")
    @classmethod
    def _multipliers(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if any(m <= 0 or m == 1 for m in value):
            raise ValueError("length multipliers must be > 0 and not 1 (1 is the base prompt)")
        return value


class ScriptGrid(StrictModel):
    """The script family (``sago_core/variants/script.py``, ``romanization.py``): the same
    text typed in other characters. Percent ladders like capitalisation's, each over the
    eligible characters of the position's region: ``fullwidth`` (ASCII -> full-width forms,
    as an IME types them), ``homoglyphs`` (Latin letters -> look-alike Cyrillic/Greek
    letters), ``diacritics_added`` (ASCII letters -> accented forms) and
    ``diacritics_stripped`` (accented Latin letters -> their base letters). ``romanized``
    (non-Latin scripts -> Latin: pinyin, Hepburn, or a general transliteration) and
    ``han_converted`` (Simplified <-> Traditional Chinese) act on the whole prompt. A
    transform with nothing to change in a prompt builds no variant for it."""

    fullwidth: tuple[int, ...] = (10, 25, 50, 75, 100)
    homoglyphs: tuple[int, ...] = (10, 25, 50, 75, 100)
    diacritics_added: tuple[int, ...] = (10, 25, 50, 75, 100)
    diacritics_stripped: tuple[int, ...] = (100,)
    romanized: bool = True
    han_converted: bool = True
    positions: tuple[Position, ...] = ALL_POSITIONS

    @field_validator("fullwidth", "homoglyphs", "diacritics_added", "diacritics_stripped")
    @classmethod
    def _percent(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if any(not 1 <= s <= 100 for s in value):
            raise ValueError("script percentages must be within 1..100")
        return value


class LanguageGrid(StrictModel):
    """The language family (``sago_core/variants/language.py``): each base question asked
    again in each of ``languages``, in the translation its parallel file carries. Derived
    from the run's ``languages`` and its parallel ``datasets`` entries (``sources``), never
    written by hand: it is how the variant stage learns where the translations are."""

    languages: tuple[str, ...]
    sources: tuple[str, ...]


# The languages a translator may be asked for (``variants.translation.languages``): code ->
# the English name the instruction uses. Every code's primary subtag is one py3langid
# identifies (the ``lang`` axis checks the answers, and the translation stage the
# translations, with it); ``zh_cn``/``zh_tw`` follow MKQA's codes.
TRANSLATION_LANGUAGES: dict[str, str] = {
    "am": "Amharic",
    "ar": "Arabic",
    "bg": "Bulgarian",
    "bn": "Bengali",
    "ca": "Catalan",
    "cs": "Czech",
    "da": "Danish",
    "de": "German",
    "el": "Greek",
    "es": "Spanish",
    "et": "Estonian",
    "fa": "Persian",
    "fi": "Finnish",
    "fr": "French",
    "he": "Hebrew",
    "hi": "Hindi",
    "hr": "Croatian",
    "hu": "Hungarian",
    "id": "Indonesian",
    "it": "Italian",
    "ja": "Japanese",
    "km": "Khmer",
    "ko": "Korean",
    "lt": "Lithuanian",
    "lv": "Latvian",
    "ms": "Malay",
    "nl": "Dutch",
    "no": "Norwegian",
    "pl": "Polish",
    "pt": "Portuguese",
    "ro": "Romanian",
    "ru": "Russian",
    "sk": "Slovak",
    "sl": "Slovenian",
    "sv": "Swedish",
    "sw": "Swahili",
    "ta": "Tamil",
    "te": "Telugu",
    "th": "Thai",
    "tr": "Turkish",
    "uk": "Ukrainian",
    "ur": "Urdu",
    "vi": "Vietnamese",
    "yo": "Yoruba",
    "zh_cn": "Simplified Chinese",
    "zh_tw": "Traditional Chinese",
    "zu": "Zulu",
}


class TranslationSettings(StrictModel):
    """Machine translation (``sago_core/stages/translation.py``): each prompt
    translated by ``translator`` (a model spec, API models included; the embedded model by
    default) into each of ``languages`` at T = 0, cached by (translator identity,
    instruction version, language, text) like the structural rewrites. A translation is a
    ``language`` variant (subtype ``mt:<code>``); with ``back_check`` it is translated back
    to English and kept only if that passes the semantic filter against the base prompt.
    With ``round_trip`` the English back-translation is itself a variant (family
    ``round_trip``, subtype ``<code>``): English, so every English axis applies."""

    languages: tuple[str, ...]
    translator: str = "hf:smollm2-135m"
    round_trip: bool = True
    back_check: bool = True
    max_new_tokens: int = Field(default=128, ge=8, le=1024)
    batch_size: int = Field(default=16, ge=1)

    @field_validator("translator")
    @classmethod
    def _translator_spec(cls, value: str) -> str:
        return check_model_spec(value.strip())

    @field_validator("languages")
    @classmethod
    def _translatable(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        codes = tuple(v.strip() for v in value)
        if not codes:
            raise ValueError("must name at least one language code")
        if len(set(codes)) != len(codes):
            raise ValueError(f"{list(codes)} name a language twice")
        unknown = [c for c in codes if c not in TRANSLATION_LANGUAGES]
        if unknown:
            base = (
                f" ({BASE_LANGUAGE!r} is the prompts' own language)"
                if BASE_LANGUAGE in unknown
                else ""
            )
            raise ValueError(
                f"{unknown} not among the translatable languages{base}; known: "
                f"{', '.join(TRANSLATION_LANGUAGES)}"
            )
        return codes


class FamilyGrid(StrictModel):
    """The cells of a family the grid builds from its declaration (``variants.families.NAME``,
    a family of ``registry/families.py`` with a transform, e.g. from a plug-in): a field left
    out is the declaration's; the subtypes are among the declared ones."""

    subtypes: tuple[str, ...] | None = None
    strengths: tuple[float, ...] | None = None
    positions: tuple[Position, ...] | None = None
    # Recorded, not read: the declaring plug-in and its version, so a run's id and the
    # variants' cache key follow a new version of the plug-in's code.
    plugin: str | None = None


class VariantGrid(StrictModel):
    """Which variant families are built; a family set to null is not built at all."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    # ``register`` would shadow ABCMeta.register on the model class; the YAML key stays.
    register_grid: RegisterGrid | None = Field(default=RegisterGrid(), alias="register")
    noise: NoiseGrid | None = NoiseGrid()
    structural: StructuralGrid | None = StructuralGrid()
    # The noise floor: the base prompt asked again, unchanged, under the same settings. Its
    # deltas are what the backend varies by itself (batching, kernels, API sampling).
    replay: bool = True
    # Off unless asked for; see ``_off_families_as_before``.
    script: ScriptGrid | None = None
    # Derived from ``RunConfig.languages``; see ``_off_families_as_before``.
    language: LanguageGrid | None = None
    # Machine translation and round trips; off unless asked for.
    translation: TranslationSettings | None = None
    # Families built from their declarations (a plug-in's), by name, each with its cells
    # (subtypes, strengths, positions; left out: all declared); none unless asked for.
    families: dict[str, FamilyGrid] = Field(default_factory=dict)

    @field_validator("families")
    @classmethod
    def _declared_families(cls, value: dict[str, FamilyGrid]) -> dict[str, FamilyGrid]:
        """Each family's cells in full (the declaration's where left out), so the run's
        configuration, and with it its id and cache keys, records what is built."""
        resolved = {}
        for name, cells in value.items():
            spec = family_spec(name)
            if spec.transform is None:
                raise ValueError(
                    f"{name!r} is configured as variants.{name}, not here (families built "
                    f"from their declaration: {', '.join(declared_grid_families()) or 'none'})"
                )
            subtypes = spec.subtypes if cells.subtypes is None else cells.subtypes
            unknown = sorted(set(subtypes) - set(spec.subtypes))
            if unknown or not subtypes:
                raise ValueError(
                    f"{name}: subtypes {unknown or '[]'} are not among {list(spec.subtypes)}"
                )
            resolved[name] = FamilyGrid.model_validate(
                {
                    "subtypes": subtypes,
                    "strengths": spec.strengths if cells.strengths is None else cells.strengths,
                    "positions": spec.positions if cells.positions is None else cells.positions,
                    "plugin": plugins.version_of(plugins.VARIANT_FAMILIES, name),
                }
            )
        return resolved

    @model_serializer(mode="wrap")
    def _off_families_as_before(self, handler: SerializerFunctionWrapHandler) -> Any:
        """A grid without the script or language family, or without translation,
        serialises exactly as it did before they existed, so its run id, result hash and
        cache keys stay the same."""
        data = handler(self)
        if isinstance(data, dict):
            for family in ("script", "language", "translation"):
                if getattr(self, family) is None:
                    data.pop(family, None)
            if not self.families:
                data.pop("families", None)
        return data


class PosixMatrixSettings(StrictModel):
    """POSIX's full N x N matrix (``RunConfig.posix_matrix``; null: off, the default): each
    answer of an instance teacher-forced under every prompt text of that instance (the base
    and its kept variants with an answer; the replay is no variant), so ``posix`` in
    peer_metrics.parquet is the paper's index. N^2 teacher-forced sequences per instance.
    ``max_prompts``: the most prompt texts of one instance; an instance with more keeps a
    uniform sample of that many, drawn with ``RunConfig.seed`` (the texts with the smallest
    hash of (seed, dataset, prompt, variant)), and every ordered pair among them."""

    max_prompts: int = Field(default=8, ge=2, le=64)
