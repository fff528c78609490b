"""Strict, typed run configuration, parsed once at the edge (CLI or deployment parameters).

One module per part of the configuration: ``run`` holds ``RunConfig``, its presets and
``build_config``; ``generation``, ``scoring``, ``engines``, ``variants``, ``budget``,
``refusal`` and ``tracking`` hold its sections; ``base`` the strict model every section is
built on; ``errors`` the one-line messages. The names re-exported here are the package's
public face, so callers import them from ``sago_core.config`` whichever module owns them.
"""

from sago_core.config.base import StrictModel, check_model_spec
from sago_core.config.budget import BudgetSettings
from sago_core.config.engines import (
    ApiPrices,
    ApiSettings,
    ApiSpending,
    OrchestrationSettings,
    VllmSettings,
)
from sago_core.config.generation import SAMPLING_KEYS, GenerationSettings, TemplateKwargs
from sago_core.config.refusal import RefusalSettings
from sago_core.config.run import (
    BUILTIN_DATASET,
    DATASET_NAMES,
    DEFAULT_PRESET,
    PARALLEL_LAYOUTS,
    PRESETS,
    Preset,
    RunConfig,
    build_config,
    parallel_entry,
    read_config_file,
)
from sago_core.config.scoring import (
    AnalysisSettings,
    BertScoreSettings,
    PatchingSettings,
    RegisterJudgeSettings,
    StatisticsSettings,
)
from sago_core.config.tracking import TrackingSettings
from sago_core.config.variants import (
    ALL_POSITIONS,
    EMBEDDED_REWRITER,
    TRANSLATION_LANGUAGES,
    FamilyGrid,
    LanguageGrid,
    NoiseGrid,
    Position,
    PosixMatrixSettings,
    RegisterGrid,
    ScriptGrid,
    StructuralGrid,
    TranslationSettings,
    VariantGrid,
)

__all__ = [
    "ALL_POSITIONS",
    "BUILTIN_DATASET",
    "DATASET_NAMES",
    "DEFAULT_PRESET",
    "EMBEDDED_REWRITER",
    "PARALLEL_LAYOUTS",
    "PRESETS",
    "SAMPLING_KEYS",
    "TRANSLATION_LANGUAGES",
    "AnalysisSettings",
    "ApiPrices",
    "ApiSettings",
    "ApiSpending",
    "BertScoreSettings",
    "BudgetSettings",
    "FamilyGrid",
    "GenerationSettings",
    "LanguageGrid",
    "NoiseGrid",
    "OrchestrationSettings",
    "PatchingSettings",
    "Position",
    "PosixMatrixSettings",
    "Preset",
    "RefusalSettings",
    "RegisterGrid",
    "RegisterJudgeSettings",
    "RunConfig",
    "ScriptGrid",
    "StatisticsSettings",
    "StrictModel",
    "StructuralGrid",
    "TemplateKwargs",
    "TrackingSettings",
    "TranslationSettings",
    "VariantGrid",
    "VllmSettings",
    "build_config",
    "check_model_spec",
    "parallel_entry",
    "read_config_file",
]
