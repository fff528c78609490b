"""Log a finished run to Weights & Biases: one W&B run per (sago run, model), grouped by
the model's family (the experiment MLflow would put it in), its parameters as the run's
config, its metrics logged once at step 0 (so they are also its summary), its files saved
with it.

Online or offline is W&B's own setting unless the section names a mode: an offline run
stays in W&B's folder until ``wandb sync``. The run id is stable per (sago run, model), so
logging a run again resumes the W&B run it made the first time.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from sago_core.config.tracking import WandbSettings
from sago_core.tracking.common import experiment_name, wandb_run_id
from sago_core.tracking.record import RunRecord


def log_to_wandb(run: RunRecord, settings: WandbSettings) -> list[str]:
    """Every model of ``run``; the W&B run ids. Raises whatever W&B raises when it cannot
    log (the caller warns)."""
    import wandb

    logged = []
    for record in run.models:
        if settings.dir is not None:
            settings.dir.mkdir(parents=True, exist_ok=True)
        wb_run = wandb.init(
            project=settings.project,
            entity=settings.entity,
            mode=settings.mode,
            dir=str(settings.dir) if settings.dir is not None else None,
            id=wandb_run_id(run.run_id, record.model),
            name=f"{run.run_id} {record.model}",
            group=experiment_name(record.tags["sago.model"]),
            config={**record.params, **record.tags},
            tags=["sago"],
            resume="allow",
            reinit="create_new",
            # The run's own console and the machine's statistics are not the results.
            settings=wandb.Settings(
                console="off",
                silent=True,
                x_disable_stats=True,
                init_timeout=settings.timeout_s,
            ),
        )
        try:
            wb_run.log(record.metrics, step=0)
            for path in record.files:  # W&B uploads what its run folder holds at the end
                shutil.copy2(path, Path(wb_run.dir) / path.name)
        finally:
            wb_run.finish()
        logged.append(str(wb_run.id))
    return logged
