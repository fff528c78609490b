"""The run configuration's sections of what measures the answers: ``analysis`` (the
teacher-forced pass and activation patching), ``bertscore``, ``register_judge`` (the
mirroring axis' judge) and ``statistics``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from sago_core.config.base import StrictModel


class BertScoreSettings(StrictModel):
    """BERTScore scorer for response similarity and for the semantic filter on prompts.

    ``model`` is a hub id, a local directory, or the alias ``minilm-l6`` (the embedded
    all-MiniLM-L6-v2). ``semantic_threshold`` is calibrated per scorer: the paper's 0.85
    belongs to roberta-large.
    """

    model: str = "roberta-large"
    num_layers: int = Field(default=17, ge=1)
    semantic_threshold: float = Field(default=0.85, gt=0.0, lt=1.0)
    batch_size: int = Field(default=64, ge=1)
    # Whether ``model`` embeds text beyond English: null reads it from the model's
    # name (``sago_core/axes/text_similarity.py``, ``multilingual_encoder``); an English-only
    # encoder leaves BERTScore of other-language pairs missing with a reason, never a number.
    multilingual: bool | None = None
    # Rescale the answers' F1 with the encoder's baseline (bert-score's method: the mean F1 of
    # unrelated sentence pairs; sago_core/baselines/bertscore.py), so 0 means "as alike as
    # two unrelated sentences". Only encoders with a shipped baseline.
    rescale_with_baseline: bool = False

    @model_serializer(mode="wrap")
    def _unset_as_before(self, handler: SerializerFunctionWrapHandler) -> Any:
        """Without ``multilingual`` or ``rescale_with_baseline`` set, serialised exactly as
        before they existed."""
        data = handler(self)
        if isinstance(data, dict):
            if self.multilingual is None:
                data.pop("multilingual", None)
            if not self.rescale_with_baseline:
                data.pop("rescale_with_baseline", None)
        return data

    @model_validator(mode="after")
    def _baseline_shipped(self) -> BertScoreSettings:
        if self.rescale_with_baseline:
            from sago_core.baselines.bertscore import baseline_f1, no_baseline

            if baseline_f1(self.model, self.num_layers) is None:
                raise ValueError(no_baseline(self.model, self.num_layers))
        return self


class PatchingSettings(StrictModel):
    """Activation patching (``sago_core/stages/patching.py``): for at most ``max_variants``
    variants (seeded, stratified by family) the variant prompt is run once per chosen layer
    with that layer's output at the last prompt token replaced by the base prompt's.
    ``layers``: "all" (1..L) or a list of layers (1-based). Costs one forward per (variant,
    layer), in the scoring pass' batches."""

    layers: Literal["all"] | tuple[int, ...] = "all"
    max_variants: int = Field(default=24, ge=1)

    @field_validator("layers")
    @classmethod
    def _layer_list(cls, value: Any) -> Any:
        if value == "all":
            return value
        if not value or any(layer < 1 for layer in value) or len(set(value)) != len(value):
            raise ValueError("layers must be 'all' or distinct layer numbers >= 1 (1-based)")
        return tuple(sorted(value))


class AnalysisSettings(StrictModel):
    """Teacher-forced pass: length-bucketed batches of at most ``batch_size`` rows and
    ``max_batch_tokens`` padded tokens. ``patching``: null (off) or the activation-patching
    stage that runs after it in the same batches."""

    batch_size: int = Field(default=16, ge=1)
    max_batch_tokens: int = Field(default=8192, ge=64)
    patching: PatchingSettings | None = None

    def scoring_pass(self) -> AnalysisSettings:
        """What the scoring pass reads: patching is a stage of its own, so turning it on
        never recomputes the scoring pass."""
        return self.model_copy(update={"patching": None})


class RegisterJudgeSettings(StrictModel):
    """The register judge of the mirroring axis (``register_judge``): does the answer mirror
    the variant's register, asked of an LLM (YES/NO at T=0); null model = the offline
    detector. (The refusal verdicts' judge is ``refusal.judge``.)"""

    model: str | None = None  # e.g. litellm:openai/gpt-4o-mini (the paper's judge)
    batch_size: int = Field(default=16, ge=1)  # per generate call of a local judge


class StatisticsSettings(StrictModel):
    """``test_against``: the reference of the main significance marks and of Holm/BH.
    ``eps`` is the paper's fixed tolerance 0.05; ``floor`` tests each prompt's score against
    its own replay delta (paired), so only instability beyond the backend's noise counts."""

    test_against: Literal["eps", "floor"] = "eps"
