"""The training flow (``sago train``): the base model's weights, then the LoRA fine-tune on a
``sago export training`` folder through TRL's trainers, checkpointed and resumed from its
newest checkpoint (on an object store too: ``config.store``)."""

from __future__ import annotations

from prefect import flow

from sago.flows.runtime.object_store import attach_runs_store
from sago.tasks.training import base_model_task, train_task
from sago_core.training.config import TrainConfig


@flow(name="sago-train", flow_run_name="train-{config.objective}", log_prints=True)
def train(config: TrainConfig, cache_dir: str) -> str:
    attach_runs_store(config.store, config.out.parent)
    base = base_model_task(config.model, cache_dir)
    return train_task(config, base["weights"], base["identity"])
