"""Tasks of ``sago train``: the base model's weights (the embedded GGUF materialised), and the
LoRA fine-tune itself (``sago_core.training.fit``), its steps counted in the stage's progress
line and each checkpoint said in the run's log."""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger, task
from prefect.cache_policies import NONE

from sago.tasks.caching import code_version
from sago.tasks.progress import with_progress
from sago_core.training.config import TrainConfig
from sago_core.training.fit import fit
from sago_core.training.model import base_folder, trainable_source


@task(name="train-base", cache_policy=NONE, persist_result=False, result_serializer="json")
def base_model_task(spec: str, cache_dir: str) -> dict[str, str]:
    """Where the base weights are (a folder or hub id) and their identity."""
    source = trainable_source(spec)
    return {"weights": base_folder(source, Path(cache_dir)), "identity": source.identity}


@task(name="train-lora", cache_policy=NONE, persist_result=False, result_serializer="json")
def train_task(config: TrainConfig, weights: str, identity: str) -> str:
    """Not cached: it continues from the newest checkpoint in ``config.out`` every time (a
    finished training's last checkpoint is its final step, so a rerun only rewrites the
    result). Returns the merged model's folder."""
    logger = get_run_logger()

    def on_step(step: int, steps: int, loss: float, saved: Path | None) -> None:
        if saved is not None:
            logger.info("step %d/%d: loss %.4f; checkpoint %s", step, steps, loss, saved)

    code = code_version("sago_core.training.fit")
    trained = with_progress("train", fit)(config, weights, identity, code, on_step)
    return str(trained)
