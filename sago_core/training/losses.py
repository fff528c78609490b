"""The consistency objective's divergence (torch); sft and dpo are TRL's own losses.

- ``consistency``: the divergence between the next-token distributions after the base
  prompt (P, the target) and after the variant prompt (Q) at every answer token,
  teacher-forced on the base answer, averaged over tokens, plus ``sft_weight`` times the
  ``sft`` loss. P is computed without gradients: only the variant side is pulled towards
  the base side, never the base towards the variant. ``js``: 0.5 KL(P||M) + 0.5 KL(Q||M),
  M = (P + Q) / 2 (bounded by ln 2); ``kl``: KL(P||Q).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any


if TYPE_CHECKING:
    import torch


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
