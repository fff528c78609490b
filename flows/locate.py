"""Where the instability sits inside a model, as flow steps: activation patching
per model, after its scoring pass is assembled (only where ``analysis.patching`` is on), and
the per-layer profiles plus the run's patching table in the run-level tail."""

from __future__ import annotations

from sago.flows.runtime.stage_runner import StageRunner
from sago.tasks.locate import layer_profiles_task, patching_task
from sago.tasks.metrics import assemble_task
from sago_core.backends.target import ModelTarget
from sago_core.config import RunConfig


def patch_model(
    stage: StageRunner, config: RunConfig, target: ModelTarget, generations: str, analysis: str
) -> dict[str, str]:
    """``{"patching": path}`` of one model, or nothing when patching is off. Cached on the
    model's generations and analysis: turned on for a finished run, only this runs."""
    settings = config.analysis.patching
    if settings is None:
        return {}
    layout = stage.layout
    path = stage(
        patching_task,
        run_tags=[f"model:{target.spec}"],
        model=target.spec,
        target=target,
        generations_path=generations,
        analysis_path=analysis,
        settings=settings,
        batches=config.analysis.scoring_pass(),
        seed=config.seed,
        out_dir=str(layout.model_dir(target.spec)),
        cache_dir=str(layout.cache.root),
        ledger_file=str(layout.ledger),
    )
    return {"patching": path}


def locate_run(
    stage: StageRunner, config: RunConfig, generations: str, per_model: list[dict[str, str]]
) -> dict[str, str | None]:
    """Writes layer_profiles.parquet (always: it costs no model) and, with patching on, the
    run's patching.parquet. Returns the report's paths: both with patching on (the report's
    where-the-instability-sits section), else None (the report stays as it was)."""
    out = str(stage.layout.run_dir)
    profiles = stage(
        layer_profiles_task,
        analysis_paths=[m["analysis"] for m in per_model],
        generations_path=generations,
        seed=config.seed,
        out_dir=out,
    )
    parts = [m["patching"] for m in per_model if "patching" in m]
    patching = (
        stage(assemble_task, name="patching", schema_name="PATCHING", part_paths=parts, out_dir=out)
        if parts
        else None
    )
    if patching is None:
        return {"layer_profiles_path": None, "patching_path": None}
    return {"layer_profiles_path": profiles, "patching_path": patching}
