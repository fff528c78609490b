"""The three objectives' losses on one encoded example (torch; the model is a LoRA model).

- ``sft``: cross-entropy of the answer's tokens after the (variant) prompt.
- ``consistency``: the divergence between the next-token distributions after the base
  prompt (P, the target) and after the variant prompt (Q) at every answer token,
  teacher-forced on the base answer, averaged over tokens, plus ``sft_weight`` times the
  ``sft`` loss. P is computed without gradients: only the variant side is pulled towards
  the base side, never the base towards the variant. ``js``: 0.5 KL(P||M) + 0.5 KL(Q||M),
  M = (P + Q) / 2 (bounded by ln 2); ``kl``: KL(P||Q).
- ``dpo``: -log sigmoid(beta * ((log pi(chosen) - log ref(chosen)) - (log pi(rejected) -
  log ref(rejected)))), the reference being the base model itself (the adapters disabled).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sago_core.training.config import CONSISTENCY_OBJECTIVE, DPO_OBJECTIVE, TrainConfig
from sago_core.training.model import Encoded

if TYPE_CHECKING:
    import torch


def answer_log_probs(model: Any, prompt: list[int], answer: list[int]) -> torch.Tensor:
    """Log-softmax of the logits that predict each answer token: (len(answer), vocab)."""
    import torch
    import torch.nn.functional as F

    ids = torch.tensor([prompt + answer], dtype=torch.long)
    logits = model(input_ids=ids).logits[0]
    start = len(prompt) - 1
    return F.log_softmax(logits[start : start + len(answer)].float(), dim=-1)


def _token_log_probs(log_probs: torch.Tensor, answer: list[int]) -> torch.Tensor:
    import torch

    return log_probs.gather(1, torch.tensor(answer).unsqueeze(1)).squeeze(1)


def divergence(base: torch.Tensor, variant: torch.Tensor, kind: str) -> torch.Tensor:
    """Mean over tokens of JS(P, Q) or KL(P || Q), from log-probabilities (tokens, vocab)."""
    import torch

    if kind == "kl":
        per_token = (base.exp() * (base - variant)).sum(-1)
    else:
        mixture = torch.logsumexp(torch.stack([base, variant]), dim=0) - torch.log(
            torch.tensor(2.0)
        )
        per_token = 0.5 * (base.exp() * (base - mixture)).sum(-1) + 0.5 * (
            variant.exp() * (variant - mixture)
        ).sum(-1)
    return per_token.mean()


def example_loss(model: Any, example: Encoded, config: TrainConfig) -> torch.Tensor:
    """The objective's loss on one example (a scalar with gradients on the adapters)."""
    import torch
    import torch.nn.functional as F

    if config.objective == DPO_OBJECTIVE:
        assert example.rejected is not None
        chosen = _token_log_probs(
            answer_log_probs(model, example.prompt, example.answer), example.answer
        ).sum()
        rejected = _token_log_probs(
            answer_log_probs(model, example.prompt, example.rejected), example.rejected
        ).sum()
        with torch.no_grad(), model.disable_adapter():
            ref_chosen = _token_log_probs(
                answer_log_probs(model, example.prompt, example.answer), example.answer
            ).sum()
            ref_rejected = _token_log_probs(
                answer_log_probs(model, example.prompt, example.rejected), example.rejected
            ).sum()
        margin = (chosen - ref_chosen) - (rejected - ref_rejected)
        return -F.logsigmoid(config.dpo_beta * margin)
    variant = answer_log_probs(model, example.prompt, example.answer)
    sft = -_token_log_probs(variant, example.answer).mean()
    if config.objective != CONSISTENCY_OBJECTIVE:
        return sft
    assert example.base_prompt is not None
    with torch.no_grad():
        base = answer_log_probs(model, example.base_prompt, example.answer)
    return divergence(base, variant, config.divergence) + config.sft_weight * sft
