"""``sago train DATA --model hf:X --out FOLDER``: a LoRA fine-tune on a ``sago export
training`` folder (the train extra: ``pip install sago[train]``), as a Prefect flow.

The same command on the same folder resumes a killed training from its newest checkpoint.
Everything that can be refused (a model without weights to train, a GGUF file, data that is
not an export, a folder holding another training) is refused before anything loads.
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sago_cli.common import configure_environment, csv_list
from sago_cli.options import add_model, add_output
from sago_core.errors import ConfigError
from sago_core.storage.location import is_url, parse_store_url
from sago_core.training.config import DEFAULT_TARGET_MODULES, OBJECTIVES, TrainConfig

# Options that map one to one onto TrainConfig fields (argparse dest == field name).
_FIELDS = (
    "objective",
    "divergence",
    "sft_weight",
    "dpo_beta",
    "steps",
    "batch_size",
    "gradient_accumulation",
    "learning_rate",
    "lr_schedule",
    "warmup_steps",
    "lora_r",
    "lora_alpha",
    "lora_dropout",
    "target_modules",
    "max_length",
    "seed",
    "checkpoint_every",
)


def add_parser(commands: Any) -> None:
    train = commands.add_parser(
        "train",
        help="LoRA fine-tune a model on `sago export training` data (sft, consistency or "
        "dpo), checkpointed and resumable; the result evaluates as hf:OUT/model",
    )
    train.add_argument("data", type=Path, metavar="DATA", help="a `sago export training` folder")
    add_model(train, "the model to fine-tune (local weights)", required=True)
    add_output(
        train,
        "the result (resumable): a folder, or a store URL (s3://, gs://, az://: checkpoints "
        "and results are put there, and another machine resumes from them)",
        required=True,
        type=str,
    )
    fields = TrainConfig.model_fields
    train.add_argument(
        "--objective",
        choices=OBJECTIVES,
        default=fields["objective"].default,
        help="sft: the base answer after the variant prompt (reads sft.jsonl); consistency: "
        "a divergence between the next-token distributions after the base and after the "
        "variant prompt over the base answer, the base side fixed (consistency.jsonl); dpo: base "
        "answer chosen over the variant's (dpo.jsonl)",
    )
    train.add_argument(
        "--divergence", choices=("js", "kl"), default=fields["divergence"].default,
        help="consistency: Jensen-Shannon or KL(base || variant)",
    )  # fmt: skip
    train.add_argument(
        "--sft-weight", type=float, default=fields["sft_weight"].default,
        help="consistency: the weight of the SFT loss added to the divergence",
    )  # fmt: skip
    helps = {
        "dpo_beta": "dpo: beta, the preference margin's scale (higher: nearer the base)",
        "steps": "optimizer steps, one batch each",
        "batch_size": "examples per forward on each device",
        "gradient_accumulation": "forwards whose gradients make one step (a step sees "
        "batch size x this x devices examples)",
        "learning_rate": "AdamW's peak learning rate",
        "warmup_steps": "steps of linear warm-up before the schedule",
        "lora_r": "the rank of each LoRA adapter",
        "lora_alpha": "LoRA's scale numerator (the update is scaled by alpha / r)",
        "lora_dropout": "dropout on the adapters' input (0: none)",
    }
    for name, text in helps.items():
        kind = int if fields[name].annotation is int else float
        train.add_argument(
            "--" + name.replace("_", "-"), type=kind, default=fields[name].default, help=text
        )
    train.add_argument(
        "--lr-schedule", choices=("constant", "linear", "cosine"),
        default=fields["lr_schedule"].default, help="the learning rate after the warm-up",
    )  # fmt: skip
    train.add_argument(
        "--track", action="append", default=[], metavar="TRACKER",
        help="report the losses to an experiment tracker: mlflow=URI or a bare tracking URI, "
        "wandb or wandb=PROJECT (repeatable)",
    )  # fmt: skip
    train.add_argument(
        "--target-modules", type=csv_list, default=list(DEFAULT_TARGET_MODULES),
        metavar="A,B", help="the linear modules that get adapters",
    )  # fmt: skip
    train.add_argument(
        "--max-length", type=int, default=fields["max_length"].default,
        help="prompt + answer tokens (longer examples are cut)",
    )  # fmt: skip
    train.add_argument(
        "--seed", type=int, default=fields["seed"].default,
        help="the adapters' initial draw and the order of the examples",
    )  # fmt: skip
    train.add_argument(
        "--checkpoint-every", type=int, default=fields["checkpoint_every"].default,
        help="steps between checkpoints (the last step always writes one)",
    )  # fmt: skip
    train.add_argument(
        "--runs-dir", type=Path, default=Path("runs"),
        help="its .cache holds the embedded model's float weights; its .prefect Prefect's home",
    )  # fmt: skip


def train_config(args: argparse.Namespace) -> TrainConfig:
    values = {name: getattr(args, name) for name in _FIELDS}
    out, store = Path(args.out), None
    if is_url(args.out):
        location = parse_store_url(args.out, field="--out")
        if not location.prefix:
            raise ConfigError(f"--out {args.out}: name a folder below the bucket")
        store = location.parent().url
        out = location.parent().scratch() / location.name
    if args.track:
        from sago_core.config.tracking import track_option

        values["tracking"] = track_option(args.track)
    try:
        return TrainConfig(model=args.model, data=args.data, out=out, store=store, **values)
    except ValidationError as exc:
        error = exc.errors()[0]
        name = "--" + "-".join(str(p) for p in error["loc"]).replace("_", "-")
        raise ConfigError(f"{name}: {error['msg']}") from None


def command(args: argparse.Namespace) -> int:
    config = train_config(args)
    from sago_core.training.data import data_path
    from sago_core.training.model import trainable_source

    trainable_source(config.model)
    data_path(config)
    missing = [n for n in ("peft", "trl") if importlib.util.find_spec(n) is None]
    if missing:
        raise ConfigError(
            f"sago train needs the train extra ({', '.join(missing)} missing): "
            "pip install 'sago[train]'"
        )
    from sago_core.artifacts.layout import CacheLayout
    from sago_core.config import RunConfig

    configure_environment(RunConfig(runs_dir=args.runs_dir))
    from sago.flows.train import train

    started = time.monotonic()
    model = train(config, str(CacheLayout.of(args.runs_dir).materialised))
    print(f"Trained: {model} ({time.monotonic() - started:.0f} s); evaluate it as hf:{model}")
    return 0
