"""Layering: sago_core never imports prefect; its math never imports torch."""

from __future__ import annotations

import subprocess
import sys

CORE_MODULES = [
    "sago_core",
    "sago_core.config",
    "sago_core.data",
    "sago_core.variants",
    "sago_core.scoring.deltas",
    "sago_core.scoring.prompt_scores",
    "sago_core.scoring.summary",
    "sago_core.statistics",
    "sago_core.vocabulary",
    "sago_core.run_plan",
    "sago_core.artifacts.layout",
    "sago_core.backends.target",
    "sago_core.stages.variants",
    "sago_core.stages.generation",
    "sago_core.stages.analysis",
    "sago_core.stages.pairs",
    "sago_core.backends.factory",
    "sago_core.axes.text_similarity",
    "sago_core.report.summary_md",
]


def _loaded_after_import(modules: list[str]) -> set[str]:
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in modules)
        + "print(','.join(sorted({n.split('.')[0] for n in sys.modules})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.strip().split(","))


def test_sago_core_does_not_import_prefect_or_torch() -> None:
    loaded = _loaded_after_import(CORE_MODULES)
    assert "prefect" not in loaded
    assert "torch" not in loaded
    assert "transformers" not in loaded
