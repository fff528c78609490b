"""Strict, typed run configuration, parsed once at the edge (CLI or deployment parameters).

One module per part of the configuration: ``run`` holds ``RunConfig``, its presets and
``build_config``; ``generation``, ``scoring``, ``engines``, ``variants``, ``budget``,
``refusal`` and ``tracking`` hold its sections; ``base`` the strict model every section is
built on; ``errors`` the one-line messages. The names re-exported here are the package's
public face, so callers import them from ``sago_core.config`` whichever module owns them.
"""

from sago_core.config.base import StrictModel
from sago_core.config.budget import BudgetSettings
from sago_core.config.engines import (
    ApiSettings,
    ApiSpending,
    OrchestrationSettings,
    VllmSettings,
)
from sago_core.config.generation import SAMPLING_KEYS, GenerationSettings, TemplateKwargs
from sago_core.config.run import (
    BUILTIN_DATASET,
    DATASET_NAMES,
    PARALLEL_LAYOUTS,
    PRESETS,
    RunConfig,
    build_config,
    parallel_entry,
    read_config_file,
)
from sago_core.config.scoring import (
    AnalysisSettings,
    BertScoreSettings,
    PatchingSettings,
)
from sago_core.config.variants import (
    ALL_POSITIONS,
    TRANSLATION_LANGUAGES,
    LanguageGrid,
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
    "PARALLEL_LAYOUTS",
    "PRESETS",
    "SAMPLING_KEYS",
    "TRANSLATION_LANGUAGES",
    "AnalysisSettings",
    "ApiSettings",
    "ApiSpending",
    "BertScoreSettings",
    "BudgetSettings",
    "GenerationSettings",
    "LanguageGrid",
    "OrchestrationSettings",
    "PatchingSettings",
    "Position",
    "PosixMatrixSettings",
    "RegisterGrid",
    "RunConfig",
    "ScriptGrid",
    "StrictModel",
    "StructuralGrid",
    "TemplateKwargs",
    "TranslationSettings",
    "VariantGrid",
    "VllmSettings",
    "build_config",
    "parallel_entry",
    "read_config_file",
]
