"""The run configuration's ``generation`` section: decoding and prompt rendering."""

from __future__ import annotations

from typing import Any

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    field_serializer,
    field_validator,
    model_serializer,
)

from sago_core.config.base import StrictModel

TemplateValue = bool | int | float | str
TemplateKwargs = tuple[tuple[str, TemplateValue], ...]


# What only sampling (T > 0) reads: left out of a greedy configuration's serialised form.
SAMPLING_KEYS = ("temperature", "top_p", "top_k", "samples", "seed")


class GenerationSettings(StrictModel):
    """Decoding and prompt rendering, the same on every backend.

    Greedy (T = 0) is argmax decoding: no repetition penalty, no top-k/top-p, no
    temperature, whatever a checkpoint's ``generation_config`` says; ``use_model_defaults``
    opts into the checkpoint's own settings instead (recorded in every ``engine`` record).
    ``chat_template_kwargs`` go to the chat template (null: ``{enable_thinking: false}``
    where the template takes that variable, so thinking models answer directly).

    Sampling (``temperature`` > 0): the logits are divided by ``temperature``, then
    ``top_k`` (0: off) and ``top_p`` (1: off) keep the likeliest tokens, in that order on
    every backend. Each sample is drawn with a seed of its own, derived from ``seed`` and
    what it answers (``sample_seeds.sample_seed``). ``samples``: answers per prompt text
    (K; K > 1 needs T > 0). ``temperatures``: a sweep, one arm per
    temperature (T = 0 arms greedy with one sample). At T = 0 ``top_p``, ``top_k`` and ``seed``
    change nothing, and a greedy configuration serialises without the sampling keys, so
    greedy runs keep their result hashes and caches.
    """

    max_new_tokens: int = Field(default=100, ge=1, le=4096)
    batch_size: int = Field(default=16, ge=1)
    use_model_defaults: bool = False
    # Stored as sorted (key, value) pairs so the settings stay hashable; written as a mapping.
    chat_template_kwargs: TemplateKwargs | None = None
    temperature: float = Field(default=0.0, ge=0.0, allow_inf_nan=False)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0, allow_inf_nan=False)
    top_k: int = Field(default=0, ge=0)
    # A temperature sweep: null, no sweep; serialised only when set.
    temperatures: tuple[float, ...] | None = None
    samples: int = Field(default=1, ge=1)
    seed: int = Field(default=0, ge=0)

    @field_validator("temperatures")
    @classmethod
    def _sweep(
        cls, value: tuple[float, ...] | None, info: ValidationInfo
    ) -> tuple[float, ...] | None:
        if value is None:
            return value
        if not value:
            raise ValueError("must list at least one temperature")
        for t in value:
            if not (t >= 0 and t < float("inf")):
                raise ValueError(f"{t}: every temperature must be finite and >= 0")
        if len(set(value)) != len(value):
            raise ValueError(f"{list(value)} name a temperature twice")
        if info.data.get("use_model_defaults") and any(t > 0 for t in value):
            raise ValueError(
                "use_model_defaults decodes with the checkpoint's own settings; a sweep "
                "over temperatures above 0 needs it off"
            )
        return tuple(sorted(value))

    @field_validator("temperature")
    @classmethod
    def _one_decoding(cls, value: float, info: ValidationInfo) -> float:
        if value > 0 and info.data.get("use_model_defaults"):
            raise ValueError(
                "use_model_defaults decodes with the checkpoint's own settings; set "
                "temperature 0 or turn use_model_defaults off"
            )
        return value

    @field_validator("samples")
    @classmethod
    def _one_sample(cls, value: int, info: ValidationInfo) -> int:
        sweep = info.data.get("temperatures")
        sweeps = sweep is not None and any(t > 0 for t in sweep)
        if value > 1 and not info.data.get("temperature") and not sweeps:
            raise ValueError(
                f"{value} samples at temperature 0 are {value} identical greedy answers; "
                "set temperature > 0 or samples 1"
            )
        return value

    @property
    def sampled(self) -> bool:
        """True when answers are sampled (T > 0), False when greedy."""
        return self.temperature > 0

    @property
    def draws_samples(self) -> bool:
        """K > 1 answers per prompt text: sampled and samples > 1."""
        return self.sampled and self.samples > 1

    @model_serializer(mode="wrap")
    def _greedy_as_before(self, handler: SerializerFunctionWrapHandler) -> Any:
        """A greedy configuration without the sampling keys, exactly as it was written
        before they existed (its result hash and cache keys stay the same)."""
        data = handler(self)
        if not self.sampled and self.temperatures is None and isinstance(data, dict):
            for key in SAMPLING_KEYS:
                data.pop(key, None)
        if self.temperatures is None and isinstance(data, dict):
            data.pop("temperatures", None)
        return data

    @field_validator("chat_template_kwargs", mode="before")
    @classmethod
    def _template_pairs(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return tuple(sorted(value.items()))
        return value

    @field_serializer("chat_template_kwargs")
    def _template_mapping(self, value: TemplateKwargs | None) -> dict[str, TemplateValue] | None:
        return None if value is None else dict(value)
