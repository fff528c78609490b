"""Small torch helpers of the scoring pass, kept apart so they can be tested exactly."""

from __future__ import annotations

from typing import Any


def last_prompt_index(attention_mask: Any, prompt_lengths: Any, side: str) -> Any:
    """Index of each row's last prompt token in a padded batch.

    Right padding: real tokens start at 0, so it is prompt_length - 1. Left padding: real
    tokens start after the pads, so it is (width - real_length) + prompt_length - 1. Real
    length comes from the attention mask, never from pad ids (pad may equal EOS).
    """
    width = attention_mask.shape[1]
    real = attention_mask.sum(dim=1)
    start = (width - real) if side == "left" else real * 0
    return start + prompt_lengths - 1


def response_logprob_and_entropy(logits: Any, target: Any) -> tuple[float, float]:
    """Sum of log p(target_t) and mean entropy (nats) of the full next-token distributions.

    ``logits``: (n, vocab) float32 for the n response positions; ``target``: (n,) token ids.
    A token of probability 0 (a -inf logit) adds 0 to the entropy, as 0 log 0 = 0; anything
    non-finite that remains (a -inf log-probability of a target, NaN logits) is returned as
    it is, for the caller to record as missing.
    """
    import torch

    logp = torch.log_softmax(logits.float(), dim=-1)
    token_logp = logp.gather(1, target.long().unsqueeze(1)).squeeze(1)
    p = logp.exp()
    terms = torch.where(p > 0, -p * logp, torch.zeros_like(p))
    terms = torch.where(torch.isnan(logp), logp, terms)  # NaN stays NaN
    entropy = terms.sum(dim=-1)
    return float(token_logp.sum()), float(entropy.mean())
