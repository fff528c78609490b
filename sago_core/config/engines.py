"""The run configuration's sections of the engines that serve models: ``api`` (LiteLLM API
models, their keys, retries, prices and spending cap), ``vllm`` and ``orchestration``
(shards and devices)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from sago_core.config.base import StrictModel, renamed_key


class ApiSpending(StrictModel):
    """Per-run ceilings on API spending (all API models and the judges together), the
    ``api.spending`` section. Null: no ceiling. In-flight requests may finish past a token
    or cost ceiling by at most ``concurrency`` calls; the request ceiling is never passed."""

    max_requests: int | None = Field(default=None, ge=0)
    max_tokens: int | None = Field(default=None, ge=0)
    max_cost_usd: float | None = Field(default=None, ge=0)


class ApiPrices(StrictModel):
    """USD per million tokens, for models LiteLLM's price map does not know."""

    input_per_million: float = Field(ge=0)
    output_per_million: float = Field(ge=0)


class ApiSettings(StrictModel):
    """LiteLLM API models (``litellm:<provider>/<model>``) and the register judge.

    Keys never appear here: ``key_env`` names an environment variable and ``key_secret`` a
    Prefect Secret block; with neither, LiteLLM reads its provider's usual variable.
    """

    base_url: str | None = None
    key_env: str | None = None
    key_secret: str | None = None
    concurrency: int = Field(default=8, ge=1, le=256)
    max_retries: int = Field(default=4, ge=0, le=20)
    timeout_s: float = Field(default=60.0, gt=0)
    backoff_s: float = Field(default=1.0, ge=0)
    max_backoff_s: float = Field(default=30.0, ge=0)
    max_retry_after_s: float = Field(default=120.0, ge=0)
    allow_length_cutoff: bool = False
    # The spending cap; called ``budget`` before ``budget:`` came to mean a sample of the
    # grid, and still read under that name (``_spending_was_budget``).
    spending: ApiSpending = ApiSpending()
    prices: ApiPrices | None = None

    @model_validator(mode="before")
    @classmethod
    def _spending_was_budget(cls, data: Any) -> Any:
        return renamed_key(data, "budget", "spending", "api.")


class VllmSettings(StrictModel):
    """vLLM engines for ``vllm:`` models, each in a worker process of the vLLM environment.

    ``python``: that environment's interpreter (default: $SAGO_VLLM_PYTHON, else
    ``.venv-vllm/bin/python`` made by ``make setup-vllm``). Engine options go to ``vllm.LLM``;
    ``gpu_memory_utilization`` and ``tensor_parallel_size`` matter on GPUs only.
    """

    python: str | None = None
    dtype: str = "float32"
    max_model_len: int | None = Field(default=2048, ge=64)
    gpu_memory_utilization: float = Field(default=0.9, gt=0, le=1)
    tensor_parallel_size: int = Field(default=1, ge=1)
    enforce_eager: bool = True
    cpu_kv_cache_gib: int = Field(default=2, ge=1)
    startup_timeout_s: float = Field(default=900.0, gt=0)


class OrchestrationSettings(StrictModel):
    """Model work is cut into shards of at most ``shard_size`` prompts of one dataset; each
    shard is cached on its own inputs, so a rerun recomputes only unfinished shards."""

    shard_size: int = Field(default=32, ge=1)
    # local: shards run in this process. deployments: each device queue of the work pool
    # (``<queue_prefix>0`` .. ``<queue_prefix><devices-1>``, one worker per GPU, each queue
    # limited to one run) serves a group of shards through the ``sago-shard`` deployment.
    # local with several devices: one worker process per device on this machine, each with
    # CUDA_VISIBLE_DEVICES set before it starts. "auto": every GPU found (or the CPU alone).
    mode: Literal["local", "deployments"] = "local"
    devices: int | Literal["auto"] = 1
    # A model larger than one device: each worker owns this many devices (consecutive ids);
    # the transformers pass spreads the model over them (device_map), vLLM uses them as its
    # tensor-parallel group. ``devices`` counts devices, so workers = devices // this.
    devices_per_worker: int = Field(default=1, ge=1)
    queue_prefix: str = "device-"
    shard_deployment: str = "sago-shard/sago-shard"

    @field_validator("devices")
    @classmethod
    def _at_least_one(cls, value: int | str) -> int | str:
        if isinstance(value, int) and value < 1:
            raise ValueError("devices must be >= 1 or 'auto'")
        return value

    @model_validator(mode="after")
    def _whole_workers(self) -> OrchestrationSettings:
        if isinstance(self.devices, int) and self.devices % self.devices_per_worker:
            raise ValueError(
                f"devices ({self.devices}) must be a multiple of devices_per_worker "
                f"({self.devices_per_worker})"
            )
        return self
