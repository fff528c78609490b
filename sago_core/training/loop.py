"""The training loop: seeded batches, AdamW on the LoRA weights, a checkpoint every
``checkpoint_every`` steps and at the end, and resume from the newest checkpoint.

Reproducible on CPU: the batches of every step are a function of the seed alone (each epoch a
seeded shuffle), the adapters start from a seeded draw, and a checkpoint carries the optimizer
and torch's RNG; so a training killed and resumed ends on the weights an uninterrupted one
reaches.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sago_core.progress import each
from sago_core.training.checkpoint import checkpoints, load_checkpoint, save_checkpoint, trainable
from sago_core.training.config import TrainConfig
from sago_core.training.losses import example_loss
from sago_core.training.model import Encoded

if TYPE_CHECKING:
    pass

# Called after every step with (step, steps, loss); a checkpoint written says its folder.
StepHook = Callable[[int, int, float, Path | None], None]


def batches(n: int, batch_size: int, steps: int, seed: int) -> list[list[int]]:
    """The example indices of each step: epochs of seeded shuffles, cut into batches."""
    needed = steps * batch_size
    order: list[int] = []
    epoch = 0
    while len(order) < needed:
        shuffled = list(range(n))
        random.Random(f"{seed}:{epoch}").shuffle(shuffled)
        order.extend(shuffled)
        epoch += 1
    return [order[s * batch_size : (s + 1) * batch_size] for s in range(steps)]


def train_adapters(
    model: Any,
    examples: Sequence[Encoded],
    config: TrainConfig,
    out: Path,
    on_step: StepHook | None = None,
) -> list[float]:
    """Train ``model``'s adapters for ``config.steps`` steps (continuing from the newest
    checkpoint under ``out``); the mean loss of every step."""
    import torch

    optimizer = torch.optim.AdamW(trainable(model).values(), lr=config.learning_rate)
    start, losses = 0, []
    found = checkpoints(out)
    if found:
        resumed = load_checkpoint(found[-1][1], model, optimizer)
        start, losses = resumed.step, resumed.losses
    schedule = batches(len(examples), config.batch_size, config.steps, config.seed)
    model.train()
    for step in each(range(start, config.steps), config.steps - start):
        optimizer.zero_grad()
        total = 0.0
        for index in schedule[step]:
            loss = example_loss(model, examples[index], config) / len(schedule[step])
            if not math.isfinite(loss.item()):
                raise FloatingPointError(f"step {step + 1}: the loss is not finite ({loss.item()})")
            loss.backward()
            total += loss.item()
        optimizer.step()
        losses.append(total)
        done = step + 1
        saved = None
        if done % config.checkpoint_every == 0 or done == config.steps:
            saved = save_checkpoint(out, done, model, optimizer, losses, config.keep_checkpoints)
        if on_step is not None:
            on_step(done, config.steps, total, saved)
    model.eval()
    return losses
