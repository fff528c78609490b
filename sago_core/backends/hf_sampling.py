"""How the transformers backend samples at T > 0 (hf.py): each row's next token drawn in a
logits processor from the row's own ``torch.Generator``, so a row's answer depends on its
own logits and seed, never on its batch companions; and the stopping hook that counts the
decoding steps."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sago_core.backends.protocol import Sampling

# How this backend samples, recorded with every sampled answer.
SAMPLER = "per-row torch.Generator, exponential race after temperature, top-k, top-p"


def sample_rows(logits: Any, sampling: Sampling, generators: Sequence[Any]) -> Any:
    """The next token of each row of ``logits`` (rows x vocabulary), drawn under
    ``sampling`` with row i's own ``generators[i]``: argmax of p / E, E ~ Exp(1) drawn per
    token (the exponential race, as vLLM draws). Unlike an inverse-CDF draw over sorted
    probabilities, a last-digit change in the logits (another batch's padding) flips the
    choice only when two tokens tie to that digit."""
    import torch

    scores = logits.float() / sampling.temperature
    if sampling.top_k > 0:
        kth = torch.topk(scores, min(sampling.top_k, scores.shape[-1]), dim=-1).values[:, -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    if sampling.top_p < 1.0:  # keep the likeliest tokens until their mass reaches top_p
        ordered, order = torch.sort(probs, dim=-1, descending=True, stable=True)
        dropped = (torch.cumsum(ordered, dim=-1) - ordered) >= sampling.top_p
        probs = probs.masked_fill(dropped.scatter(-1, order, dropped), 0.0)
    race = torch.empty_like(probs)
    for row, generator in enumerate(generators):
        race[row].exponential_(generator=generator)
    return (probs / race).argmax(dim=-1)


class RowSampler:
    """A logits processor for greedy ``generate``: each row's token drawn by
    ``sample_rows`` with its own generator, every other token's score set to -inf."""

    def __init__(self, sampling: Sampling) -> None:
        import torch

        self._torch = torch
        self.sampling = sampling
        self.generators: list[Any] = []

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if not self.generators:  # on the device the scores are on
            self.generators = [
                self._torch.Generator(device=scores.device).manual_seed(seed)
                for seed in self.sampling.seeds
            ]
        chosen = sample_rows(scores, self.sampling, self.generators)
        only = scores.new_full(scores.shape, float("-inf"))
        return only.scatter_(-1, chosen.unsqueeze(-1), 0.0)


class Steps:
    """A stopping criterion that never stops: it only calls ``step`` at each decode step,
    so the stage's progress moves inside a long batch."""

    def __init__(self, step: Callable[[], None]) -> None:
        self.step = step

    def __call__(self, input_ids: Any, scores: Any, **_: Any) -> Any:
        import torch

        self.step()
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
