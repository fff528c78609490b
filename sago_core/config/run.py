"""The run configuration itself (``RunConfig``), its presets and how a configuration is
built from a preset, a file and the command line.

Layers: preset defaults <- YAML file <- command-line overrides. An unknown key anywhere is an
error (``extra="forbid"``), so a typo never silently falls back to a default.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, ClassVar, Literal

import yaml
from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from sago_core.config.base import StrictModel, check_model_spec, renamed_key
from sago_core.config.budget import BudgetSettings
from sago_core.config.engines import ApiSettings, OrchestrationSettings, VllmSettings
from sago_core.config.errors import describe_errors
from sago_core.config.generation import GenerationSettings
from sago_core.config.refusal import RefusalSettings
from sago_core.config.scoring import (
    AnalysisSettings,
    BertScoreSettings,
    PatchingSettings,
    RegisterJudgeSettings,
    StatisticsSettings,
)
from sago_core.config.tracking import TrackingSettings
from sago_core.config.variants import (
    LanguageGrid,
    NoiseGrid,
    PosixMatrixSettings,
    RegisterGrid,
    StructuralGrid,
    VariantGrid,
)
from sago_core.errors import ConfigError
from sago_core.storage.location import is_url, parse_store_url
from sago_core.vocabulary import BASE_LANGUAGE

Preset = Literal["demo", "paper", "locate", "sampling"]
DATASET_NAMES: tuple[str, ...] = (
    "truthfulqa",
    "nq_open",
    "alpaca",
    "simpleqa_verified",
    "triviaqa",
    "hotpotqa",
)
BUILTIN_DATASET = "builtin"
# Parallel data: a ``datasets`` entry ``<layout>:<path>`` names a file that carries
# its own translations; its base-language questions are the prompts, and each language of
# ``languages`` a ``language`` variant of them (``sago_core/data/mkqa.py`` reads both layouts).
PARALLEL_LAYOUTS: tuple[str, ...] = (
    "mkqa",  # MKQA: queries {lang: text}, answers {lang: [...]}
    "parallel",  # one column per language: question, question_de, question_ja, ...
)


def parallel_entry(entry: str) -> tuple[str, Path] | None:
    """``mkqa:data/x.jsonl`` -> ("mkqa", path); any other ``datasets`` entry -> None."""
    layout, sep, path = entry.partition(":")
    if not sep or layout not in PARALLEL_LAYOUTS:
        return None
    if not path.strip():
        raise ValueError(f"datasets entry {entry!r} names no file after {layout + ':'!r}")
    return layout, Path(path.strip())


def current_names(values: Any) -> Any:
    """A configuration mapping with every key renamed since runs were first written under its
    current name (``judge`` -> ``register_judge``, ``api.budget`` -> ``api.spending``): the
    old names mean exactly the new ones."""
    values = renamed_key(values, "judge", "register_judge")
    if isinstance(values, dict) and isinstance(values.get("api"), dict):
        values = {**values, "api": renamed_key(values["api"], "budget", "spending", "api.")}
    return values


def first_names(payload: dict[str, Any]) -> dict[str, Any]:
    """A serialised configuration under the key names its run id was first hashed with, so a
    configuration written before a rename keeps its run id, its folder and its caches."""
    payload = dict(payload)
    if "register_judge" in payload:
        payload["judge"] = payload.pop("register_judge")
    if isinstance(payload.get("api"), dict) and "spending" in payload["api"]:
        api = dict(payload["api"])
        api["budget"] = api.pop("spending")
        payload["api"] = api
    return payload


class RunConfig(StrictModel):
    """A run. The field defaults are the paper's setup (the ``paper`` preset); the command
    line starts from ``DEFAULT_PRESET`` instead."""

    preset: Preset = "paper"
    models: tuple[str, ...] = ("hf:smollm2-135m",)
    datasets: tuple[str, ...] = DATASET_NAMES
    data_dir: Path | None = None
    n: int = Field(default=16, ge=1)
    question_column: str = "question"
    # Users' own prompt files: longest prompt accepted, and whether "{name}" (usually a
    # template field left unfilled) may appear in a prompt.
    max_prompt_chars: int = Field(default=100_000, ge=1)
    allow_placeholders: bool = False
    # Placeholder-like text is a warning naming the rows; with this, an error.
    strict_placeholders: bool = False
    # Models (specs as in ``models``) whose repositories may run their own Python code when
    # loaded. Empty by default: no model runs code from its folder or hub repository.
    trust_remote_code: tuple[str, ...] = ()
    seed: int = 0
    # Where a run is written, not what it computes: kept out of result and cache keys.
    # (``tracking``: where the results are also reported.)
    PLACE_FIELDS: ClassVar[frozenset[str]] = frozenset(
        {"runs_dir", "runs_store", "prefect_home", "tracking"}
    )
    # Fields (dotted) whose values may name this machine's files or folders (a folder, a
    # dataset entry's file, an encoder's folder), and the tools named by model spec
    # (``BACKEND:ID``: a folder for a local backend). What shows a config elsewhere (site,
    # exports, trackers) asks ``sago_core/config/places.py``, which reads these.
    PATH_FIELDS: ClassVar[tuple[str, ...]] = (
        "data_dir",
        "datasets",
        "bertscore.model",
        "tracking.wandb.dir",
    )
    MODEL_FIELDS: ClassVar[tuple[str, ...]] = (
        "models",
        "trust_remote_code",
        "register_judge.model",
        "refusal.judge",
        "variants.structural.rewriter",
        "variants.translation.translator",
    )
    runs_dir: Path = Path("runs")
    # The runs folder's URL when it lives on an object store (``runs_dir: s3://bucket/runs``
    # sets it); ``runs_dir`` is then this machine's scratch mirror of it.
    runs_store: str | None = None
    run_id: str | None = None
    prefect_home: Path | None = None
    generation: GenerationSettings = GenerationSettings()
    analysis: AnalysisSettings = AnalysisSettings()
    bertscore: BertScoreSettings = BertScoreSettings()
    statistics: StatisticsSettings = StatisticsSettings()
    api: ApiSettings = ApiSettings()
    vllm: VllmSettings = VllmSettings()
    # The register judge of the mirroring axis; called ``judge`` before the refusal verdicts
    # had a judge of their own (``refusal.judge``), and still read under that name.
    register_judge: RegisterJudgeSettings = RegisterJudgeSettings()
    orchestration: OrchestrationSettings = OrchestrationSettings()
    variants: VariantGrid = VariantGrid()
    # Languages each question of a parallel dataset (``mkqa:PATH``, ``parallel:PATH``) is
    # also asked in, as ``language`` variants of its English base. Null: none.
    languages: tuple[str, ...] | None = None
    # A budgeted run; null: the full grid.
    budget: BudgetSettings | None = None
    # POSIX's full matrix for the peer metrics; null: off (only the base column is scored).
    posix_matrix: PosixMatrixSettings | None = None
    refusal: RefusalSettings = RefusalSettings()  # a refusal judge; default: rules alone
    tracking: TrackingSettings | None = None  # experiment trackers; null: none

    @model_serializer(mode="wrap")
    def _no_languages_as_before(self, handler: SerializerFunctionWrapHandler) -> Any:
        """A section left unset (``names``) is left out, so its run id and cache keys stay."""
        data = handler(self)
        names = ("languages", "budget", "posix_matrix", "refusal", "tracking")
        unset = (self.languages, self.budget, self.posix_matrix, self.refusal.judge, self.tracking)
        for name, value in zip(names, unset, strict=True):
            if value is None and isinstance(data, dict):
                data.pop(name, None)
        return data

    @field_validator("languages")
    @classmethod
    def _language_codes(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is None:
            return value
        codes = tuple(v.strip() for v in value)
        if not codes or any(not c for c in codes):
            raise ValueError("must name at least one language code, none of them empty")
        if len(set(codes)) != len(codes):
            raise ValueError(f"{list(codes)} name a language twice")
        if BASE_LANGUAGE in codes:
            raise ValueError(
                f"{BASE_LANGUAGE!r} is the base language (the prompts themselves); list only "
                "the other languages"
            )
        return codes

    @field_validator("datasets")
    @classmethod
    def _parallel_entries(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for entry in value:
            parallel_entry(entry)  # a layout prefix without a file is an error here
        return value

    @model_validator(mode="after")
    def _language_family(self) -> RunConfig:
        """``languages`` needs a parallel dataset; the variant grid's ``language`` is derived
        from both (a saved config read back carries the same, and is accepted)."""
        sources = tuple(d for d in self.datasets if parallel_entry(d) is not None)
        if self.languages is not None and not sources:
            raise ValueError(
                f"languages {list(self.languages)} need a dataset that carries translations: "
                f"a datasets entry {' or '.join(f'{p}:PATH' for p in PARALLEL_LAYOUTS)}"
            )
        derived = (
            None
            if self.languages is None
            else LanguageGrid(languages=self.languages, sources=sources)
        )
        if self.variants.language != derived:
            if self.variants.language is not None:
                raise ValueError(
                    "variants.language is derived from languages and datasets; set those instead"
                )
            grid = self.variants.model_copy(update={"language": derived})
            object.__setattr__(self, "variants", grid)
        return self

    @model_validator(mode="before")
    @classmethod
    def _current_names(cls, data: Any) -> Any:
        return current_names(data)

    @model_validator(mode="before")
    @classmethod
    def _runs_on_a_store(cls, data: Any) -> Any:
        """A URL ``runs_dir`` is a store; the local folder is then this machine's scratch
        (recomputed on every machine, so a saved config resumes anywhere)."""
        if not isinstance(data, dict):
            return data
        url = data.get("runs_store")
        if url is None and is_url(str(data.get("runs_dir") or "")):
            url = str(data["runs_dir"])
        if url is None:
            return data
        return {**data, "runs_store": url, "runs_dir": parse_store_url(url).scratch()}

    @field_validator("models", "datasets")
    @classmethod
    def _non_empty(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value or any(not v.strip() for v in value):
            raise ValueError("must name at least one entry, none of them empty")
        return tuple(v.strip() for v in value)

    @field_validator("models")
    @classmethod
    def _registered_backends(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        """Every model spec names a registered backend (sago_core/registry/backends.py)."""
        for spec in value:
            check_model_spec(spec)
        return value

    @field_validator("run_id")
    @classmethod
    def _safe_run_id(cls, value: str | None) -> str | None:
        if value is not None and (not value or "/" in value or value.startswith(".")):
            raise ValueError(f"run_id {value!r} must be a plain folder name")
        return value

    @model_validator(mode="after")
    def _trusted_models_are_evaluated(self) -> RunConfig:
        strangers = [m for m in self.trust_remote_code if m not in self.models]
        if strangers:
            raise ValueError(f"trust_remote_code lists {strangers}, which are not in models")
        return self

    def result_hash(self) -> str:
        """Hash of everything that changes results (not where they are written). Patching,
        POSIX's full matrix and the refusal judge only add or redo their own artifacts, so
        they are left out: turned on for a finished run, they land in that run's folder and
        every earlier stage is a cache hit."""
        where = dict.fromkeys((*self.PLACE_FIELDS, "run_id", "posix_matrix", "refusal"), True)
        payload = self.model_dump(mode="json", exclude={**where, "analysis": {"patching": True}})
        payload = first_names(payload)
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()

    def resolved_run_id(self) -> str:
        """The same command always lands in the same run folder, so a rerun resumes it."""
        return self.run_id or f"{self.preset}-{self.result_hash()[:12]}"


# The presets, typed: ``paper`` is the field defaults themselves; ``demo`` the embedded model
# on the built-in prompts with a small grid. MiniLM layer 6 (its final layer, the one
# sentence-transformers trained) separated an entity swap ("capital of France" -> "...
# Germany": F1 0.761) from register paraphrases (0.80-0.90) best of layers 4-6; the
# threshold 0.78 sits between them (measured in tests/unit/test_semantic_calibration.py).
DEFAULT_PRESET: Preset = "demo"
PRESETS: dict[str, RunConfig] = {
    "paper": RunConfig(),
    "demo": RunConfig(
        preset="demo",
        datasets=(BUILTIN_DATASET,),
        n=3,
        generation=GenerationSettings(max_new_tokens=40, batch_size=64),
        analysis=AnalysisSettings(batch_size=32),
        bertscore=BertScoreSettings(model="minilm-l6", num_layers=6, semantic_threshold=0.78),
        variants=VariantGrid(
            register=RegisterGrid(strengths=(-4, -2, 2, 4)),
            noise=NoiseGrid(spacing=(5, 20), punctuation=(3, 10), capitalization=(25, 75)),
            structural=StructuralGrid(lengths=(0.5, 2.0), mood=True, max_new_tokens=64),
        ),
    ),
}
# ``locate``: the demo run with activation patching at every layer (where the instability is).
PRESETS["locate"] = PRESETS["demo"].model_copy(
    update={
        "preset": "locate",
        "analysis": AnalysisSettings(batch_size=32, patching=PatchingSettings()),
    }
)
# ``sampling``: the demo run sampled at T 0.7 with 8 answers per prompt text.
PRESETS["sampling"] = PRESETS["demo"].model_copy(
    update={
        "preset": "sampling",
        "generation": PRESETS["demo"].generation.model_copy(
            update={"temperature": 0.7, "samples": 8}
        ),
    }
)


def _deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def read_config_file(path: Path) -> dict[str, Any]:
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"config file {path} does not exist") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {exc}") from exc
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"config file {path} must hold a mapping at the top level")
    return loaded


def build_config(
    preset: str | None = None,
    file_values: dict[str, Any] | None = None,
    overrides: dict[str, Any] | None = None,
    source: str = "command line",
) -> RunConfig:
    """Merge preset <- file <- overrides and validate strictly; errors name the field."""
    file_values = file_values or {}
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    chosen = preset or overrides.get("preset") or file_values.get("preset") or DEFAULT_PRESET
    if chosen not in PRESETS:
        raise ConfigError(f"unknown preset {chosen!r}; choose one of {sorted(PRESETS)}")
    base = PRESETS[chosen].model_dump(by_alias=True)
    # The presets leave the structural rewrite method to follow the rewriter: derived again
    # after the merge, so a file or argument naming another rewriter gets that one's method.
    structural = (base.get("variants") or {}).get("structural")
    if structural is not None:
        structural.pop("method", None)
    try:  # renamed keys first, so an old name in the file meets its new name in the preset
        file_values, overrides = current_names(file_values), current_names(overrides)
    except ValueError as exc:
        raise ConfigError(f"invalid configuration ({source}): {exc}") from exc
    merged = _deep_merge(_deep_merge(base, file_values), overrides)
    merged["preset"] = chosen
    try:
        return RunConfig.model_validate(merged)
    except ValidationError as exc:
        problems = describe_errors(exc, RunConfig)
        raise ConfigError(f"invalid configuration ({source}): {problems}") from exc
