"""What one ``sago train`` does, strict and typed: the base model, the export it reads, the
objective and every hyper-parameter. Parsed once at the edge (the command line), recorded in
the result's provenance, and compared on resume (a folder resumes only the same training)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from sago_core.config.base import StrictModel
from sago_core.config.tracking import TrackingSettings

SFT_OBJECTIVE, CONSISTENCY_OBJECTIVE, DPO_OBJECTIVE = "sft", "consistency", "dpo"
Objective = Literal["sft", "consistency", "dpo"]
OBJECTIVES: tuple[str, ...] = (SFT_OBJECTIVE, CONSISTENCY_OBJECTIVE, DPO_OBJECTIVE)
Divergence = Literal["js", "kl"]
# The learning-rate schedules offered (transformers' names); warm-up steps come first.
Schedule = Literal["constant", "linear", "cosine"]
# Every attention and MLP projection of a Llama-family block.
DEFAULT_TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj")


class TrainConfig(StrictModel):
    """One LoRA fine-tune. ``consistency``: a divergence between the next-token
    distributions under the base prompt and under the variant prompt over the base answer's
    tokens (teacher-forced), plus ``sft_weight`` times the SFT loss of the base answer after
    the variant prompt. The base side is the target (computed without gradients); only the
    variant side receives gradients."""

    model: str  # an hf: spec whose weights can be trained (a folder, a hub id, the embedded)
    data: Path  # a `sago export --training` folder
    out: Path  # the result: checkpoints, the adapter, the merged model, provenance
    # The object store that holds ``out`` (the URL of its parent folder; ``out`` is then
    # this machine's scratch copy): checkpoints and results are put there too.
    store: str | None = None
    objective: Objective = "consistency"
    divergence: Divergence = "js"
    sft_weight: float = Field(default=1.0, ge=0.0)
    dpo_beta: float = Field(default=0.1, gt=0.0)
    steps: int = Field(default=40, ge=1)
    batch_size: int = Field(default=4, ge=1)  # per device and forward
    # Forwards whose gradients add up to one step: a step sees batch_size x this x devices.
    gradient_accumulation: int = Field(default=1, ge=1)
    learning_rate: float = Field(default=2e-4, gt=0.0)
    lr_schedule: Schedule = "linear"
    warmup_steps: int = Field(default=0, ge=0)
    lora_r: int = Field(default=8, ge=1)
    lora_alpha: int = Field(default=16, ge=1)
    lora_dropout: float = Field(default=0.0, ge=0.0, lt=1.0)
    target_modules: tuple[str, ...] = DEFAULT_TARGET_MODULES
    max_length: int = Field(default=512, ge=8)  # prompt + answer tokens; longer is cut
    seed: int = 0
    checkpoint_every: int = Field(default=10, ge=1)
    keep_checkpoints: int = Field(default=2, ge=1)
    # Where the Trainer reports its losses (MLflow, W&B); never what the weights become.
    tracking: TrackingSettings | None = None

    @field_validator("target_modules")
    @classmethod
    def _some_modules(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value or any(not m.strip() for m in value):
            raise ValueError("name at least one module, e.g. q_proj,v_proj")
        return value

    def settings(self) -> dict[str, Any]:
        """What determines the trained weights (paths excluded): the resume check's key."""
        return self.model_dump(mode="json", exclude={"data", "out", "store", "tracking"})

    def report_to(self) -> list[str]:
        """The Trainer's ``report_to`` names of the trackers configured (none: [])."""
        if self.tracking is None:
            return []
        return [n for n in ("mlflow", "wandb") if getattr(self.tracking, n) is not None]
