"""The trainers ``sago train`` runs: TRL's ``SFTTrainer`` and ``DPOTrainer`` with peft's LoRA,
and the consistency objective as an ``SFTTrainer`` whose loss is a divergence between the
next-token distributions after the base prompt (P, the target, without gradients: only the
variant side is pulled towards the base side) and after the variant prompt (Q) at every
answer token, teacher-forced on the base answer, plus ``sft_weight`` times the answer's
cross-entropy. ``js``: 0.5 KL(P||M) + 0.5 KL(Q||M), M = (P + Q) / 2 (at most ln 2);
``kl``: KL(P||Q). All three share the Trainer's machinery: batched forwards, gradient
accumulation, bf16 where the device has it, the learning-rate schedule, the trackers
(``report_to``), several processes under ``accelerate launch``, and checkpoints in
safetensors (``checkpoint.py``) that a stopped training resumes from.

sft and dpo hand TRL the conversational rows of the export as they are (TRL applies the chat
template and trains on the completion only); consistency needs the variant and the base
prompt followed by the very same answer tokens, so its rows are tokenised here (with TRL's
own templating).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sago_core.progress import each
from sago_core.training.checkpoint import (
    SafetensorsCheckpoints,
    checkpoint_root,
    newest_checkpoint,
    store_mirror,
)
from sago_core.training.config import CONSISTENCY_OBJECTIVE, DPO_OBJECTIVE, TrainConfig
from sago_core.training.data import Example, Messages

if TYPE_CHECKING:
    import torch
    from transformers import TrainerCallback

# Called after every step with (step, steps, loss, None), and after every checkpoint with
# (step, steps, loss, its folder).
StepHook = Callable[[int, int, float, Path | None], None]


def _assistant(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


def _token_ids(tokenizer: Any, prompt: Messages, answer: str) -> tuple[list[int], list[int]]:
    """The prompt's and the answer's ids as the chat template writes the conversation (the
    answer's end-of-turn token included)."""
    from trl.data_utils import apply_chat_template

    text = apply_chat_template({"prompt": prompt, "completion": _assistant(answer)}, tokenizer)
    return tuple(  # type: ignore[return-value]
        list(tokenizer(text[k], add_special_tokens=False)["input_ids"])
        for k in ("prompt", "completion")
    )


def _pair(tokenizer: Any, example: Example, limit: int) -> dict[str, list[int]]:
    """One consistency row: both prompts followed by the same answer ids, cut to ``limit``
    (the answer from the right to half of it when too long, then the prompts from the left)."""
    assert example.base_prompt is not None
    prompt, answer = _token_ids(tokenizer, example.prompt, example.answer)
    base, _ = _token_ids(tokenizer, example.base_prompt, example.answer)
    if len(prompt) + len(answer) > limit:
        answer = answer[: max(1, limit // 2)]
    room = limit - len(answer)
    prompt, base = prompt[max(0, len(prompt) - room) :], base[max(0, len(base) - room) :]
    return {
        "input_ids": prompt + answer,
        "completion_mask": [0] * len(prompt) + [1] * len(answer),
        "base_input_ids": base + answer,
        "base_completion_mask": [0] * len(base) + [1] * len(answer),
    }


def rows(examples: Sequence[Example], objective: str, tokenizer: Any, max_length: int) -> Any:
    """The ``datasets.Dataset`` the objective's trainer reads."""
    from datasets import Dataset

    records: list[dict[str, Any]]
    if objective == DPO_OBJECTIVE:
        records = [
            {"prompt": e.prompt, "chosen": _assistant(e.answer), "rejected": _assistant(e.rejected)}
            for e in examples
            if e.rejected is not None
        ]
    elif objective == CONSISTENCY_OBJECTIVE:
        records = [_pair(tokenizer, e, max_length) for e in examples]
    elif tokenizer.chat_template:
        records = [{"prompt": e.prompt, "completion": _assistant(e.answer)} for e in examples]
    else:  # plain text: the messages one a line, then the answer (TRL appends the end token)
        records = [
            {"prompt": "\n".join(m["content"] for m in e.prompt) + "\n", "completion": e.answer}
            for e in examples
        ]
    return Dataset.from_list(records)


def tracker_environment(config: TrainConfig) -> dict[str, str]:
    """The variables transformers' MLflow and W&B callbacks read, from the ``tracking``
    settings (they take no other configuration)."""
    env: dict[str, str] = {}
    tracking = config.tracking
    if tracking is not None and tracking.mlflow is not None:
        env["MLFLOW_TRACKING_URI"] = tracking.mlflow.tracking_uri
        env["MLFLOW_EXPERIMENT_NAME"] = tracking.mlflow.experiment or "sago/train"
    if tracking is not None and tracking.wandb is not None:
        wandb = tracking.wandb
        env["WANDB_PROJECT"] = wandb.project
        env |= {"WANDB_ENTITY": wandb.entity} if wandb.entity else {}
        env |= {"WANDB_MODE": wandb.mode} if wandb.mode else {}
        env |= {"WANDB_DIR": str(wandb.dir)} if wandb.dir else {}
    return env


def answering_trackers(config: TrainConfig) -> list[str]:
    """The trackers the trainer reports to: an MLflow server that does not answer is left
    out with one warning line, so a tracker that is down never fails a training (its own
    folder stays the record)."""
    names = config.report_to()
    if config.tracking is not None and config.tracking.mlflow is not None:
        import logging

        from sago_core.tracking.common import TrackerUnavailable
        from sago_core.tracking.mlflow_tracker import _check_server

        try:
            _check_server(config.tracking.mlflow)
        except TrackerUnavailable as exc:
            logging.getLogger("sago.tracking").warning("sago train: not reported (%s)", exc)
            names.remove("mlflow")
    return names


def _device_settings() -> dict[str, bool]:
    """bf16 mixed precision where the device computes it (a recent GPU). Without an
    accelerator everything stays in float32 on the CPU (a CPU training is reproducible to the
    bit), and several processes there train together over gloo. Activations are recomputed
    in the backward pass (TRL's default, to save GPU memory) only on an accelerator: on a CPU
    memory is rarely short and the recomputation is a third forward per consistency step."""
    import torch

    cuda = torch.cuda.is_available()
    accelerated = cuda or torch.backends.mps.is_available()
    return {
        "bf16": cuda and torch.cuda.is_bf16_supported(),
        "use_cpu": not accelerated,
        "gradient_checkpointing": accelerated,
    }


def trainer_args(config: TrainConfig, report_to: Sequence[str] = ()) -> dict[str, Any]:
    """What every objective's Trainer is told (SFTConfig and DPOConfig share these)."""
    return {
        "output_dir": str(checkpoint_root(config.out)),
        "max_steps": config.steps,
        "per_device_train_batch_size": config.batch_size,
        "gradient_accumulation_steps": config.gradient_accumulation,
        "learning_rate": config.learning_rate,
        "lr_scheduler_type": config.lr_schedule,
        "warmup_steps": config.warmup_steps,
        **_device_settings(),
        "logging_steps": 1,
        "save_strategy": "steps",
        "save_steps": config.checkpoint_every,
        "save_total_limit": config.keep_checkpoints,
        "seed": config.seed,
        "data_seed": config.seed,
        "max_length": config.max_length,
        "report_to": list(report_to) or "none",
        "disable_tqdm": True,
    }


def pair_collator(pad: int) -> Callable[[list[dict[str, list[int]]]], dict[str, Any]]:
    """Right-padded batches of the consistency rows (both prompts with their answers)."""
    import torch
    from torch.nn.utils.rnn import pad_sequence

    def collate(batch: list[dict[str, list[int]]]) -> dict[str, Any]:
        def padded(key: str, value: int) -> torch.Tensor:
            rows = [torch.tensor(row[key]) for row in batch]
            return pad_sequence(rows, batch_first=True, padding_value=value)

        out = {}
        for side in ("", "base_"):
            ids = padded(f"{side}input_ids", -1)
            out[f"{side}attention_mask"] = (ids != -1).long()
            out[f"{side}input_ids"] = ids.masked_fill(ids == -1, pad)
            out[f"{side}completion_mask"] = padded(f"{side}completion_mask", 0)
        return out

    return collate


def answer_log_probs(model: Any, inputs: dict[str, Any], side: str = "") -> torch.Tensor:
    """Log-softmax of the logits that predict each answer token of the batch, flattened in
    row order: (answer tokens, vocab). Only the positions that predict an answer token in
    some row go through the LM head (the model's ``logits_to_keep``): the prompts' logits
    over the whole vocabulary would be computed, and differentiated, only to be dropped."""
    import torch.nn.functional as F

    predicts_answer = inputs[f"{side}completion_mask"][:, 1:].bool()
    keep = predicts_answer.any(0).nonzero().squeeze(1)
    logits = model(
        input_ids=inputs[f"{side}input_ids"],
        attention_mask=inputs[f"{side}attention_mask"],
        logits_to_keep=keep,
    ).logits
    return F.log_softmax(logits[predicts_answer[:, keep]].float(), dim=-1)


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


def _consistency_trainer(base: type) -> type:
    class ConsistencyTrainer(SafetensorsCheckpoints, base):
        """The divergence between the next-token distributions after the base prompt (the
        target, without gradients) and after the variant prompt over the base answer's
        tokens, plus ``sft_weight`` times the answer's cross-entropy after the variant."""

        def __init__(self, *args: Any, config: TrainConfig, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.sago_config = config
            # the loss is a mean already: the Trainer divides it by the accumulation steps
            self.model_accepts_loss_kwargs = False

        def compute_loss(
            self, model: Any, inputs: dict[str, Any], return_outputs: bool = False, **_: Any
        ) -> Any:
            import torch

            variant = answer_log_probs(model, inputs)
            targets = inputs["input_ids"][:, 1:][inputs["completion_mask"][:, 1:].bool()]
            sft = -variant.gather(1, targets.unsqueeze(1)).mean()
            with torch.no_grad():
                target = answer_log_probs(model, inputs, "base_")
            kind = self.sago_config.divergence
            loss = divergence(target, variant, kind) + self.sago_config.sft_weight * sft
            return (loss, None) if return_outputs else loss

    return ConsistencyTrainer


def build_trainer(
    model: Any,
    tokenizer: Any,
    examples: Sequence[Example],
    config: TrainConfig,
    *,
    peft_config: Any = None,
    report_to: Sequence[str] = (),
    callbacks: Sequence[TrainerCallback] = (),
    overrides: dict[str, Any] | None = None,
) -> Any:
    """The objective's trainer, ready to ``train()``."""
    from trl import DPOConfig, DPOTrainer, SFTConfig, SFTTrainer

    settings = {**trainer_args(config, report_to), **(overrides or {})}
    data = rows(examples, config.objective, tokenizer, config.max_length)
    common = {
        "model": model,
        "processing_class": tokenizer,
        "train_dataset": data,
        "peft_config": peft_config,
        "callbacks": list(callbacks),
    }
    if config.objective == DPO_OBJECTIVE:
        dpo = type("SafetensorsDPOTrainer", (SafetensorsCheckpoints, DPOTrainer), {})
        return dpo(args=DPOConfig(beta=config.dpo_beta, **settings), **common)
    if config.objective == CONSISTENCY_OBJECTIVE:
        args = SFTConfig(
            remove_unused_columns=False, dataset_kwargs={"skip_prepare_dataset": True}, **settings
        )
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        trainer = _consistency_trainer(SFTTrainer)
        return trainer(args=args, data_collator=pair_collator(pad), config=config, **common)
    sft = type("SafetensorsSFTTrainer", (SafetensorsCheckpoints, SFTTrainer), {})
    return sft(args=SFTConfig(**settings), **common)


def _progress(on_step: StepHook | None, steps: int) -> TrainerCallback:
    """The steps counted in the stage's progress line, and ``on_step`` told each step's loss
    and each checkpoint."""
    from transformers import TrainerCallback

    class _Progress(TrainerCallback):
        loss = float("nan")
        ticks: Any = None

        def on_train_begin(self, args: Any, state: Any, control: Any, **_: Any) -> None:
            left = steps - state.global_step
            self.ticks = each(range(left + 1), left)
            next(self.ticks)  # tells the line how many steps are left

        def on_step_end(self, args: Any, state: Any, control: Any, **_: Any) -> None:
            next(self.ticks, None)

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **_: Any) -> None:
            if logs and "loss" in logs:
                self.loss = float(logs["loss"])
                if on_step is not None:
                    on_step(state.global_step, steps, self.loss, None)

        def on_save(self, args: Any, state: Any, control: Any, **_: Any) -> None:
            folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if on_step is not None:
                on_step(state.global_step, steps, self.loss, folder)

    return _Progress()


def train_adapters(
    model: Any,
    tokenizer: Any,
    examples: Sequence[Example],
    config: TrainConfig,
    *,
    peft_config: Any = None,
    report_to: Sequence[str] = (),
    on_step: StepHook | None = None,
) -> tuple[Any, list[float]]:
    """Train for ``config.steps`` steps, continuing from the newest checkpoint under
    ``config.out`` (on the attached store too); the trained model and every step's loss."""
    import math
    import os

    import torch

    os.environ.update(tracker_environment(config))
    torch.manual_seed(config.seed)  # the adapters' initial draw
    callbacks = [store_mirror(), _progress(on_step, config.steps)]
    trainer = build_trainer(
        model,
        tokenizer,
        examples,
        config,
        peft_config=peft_config,
        report_to=report_to or answering_trackers(config),
        callbacks=callbacks,
    )
    resume = newest_checkpoint(config.out)
    trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    losses = [float(h["loss"]) for h in trainer.state.log_history if "loss" in h]
    bad = [i + 1 for i, loss in enumerate(losses) if not math.isfinite(loss)]
    if bad:
        raise FloatingPointError(f"step {bad[0]}: the loss is not finite ({losses[bad[0] - 1]})")
    trained = trainer.model
    trained.eval()
    return trained, losses
