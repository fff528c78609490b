"""Training checkpoints: everything a killed training needs to continue as if it had never
stopped, in safetensors and JSON (no pickle).

``<out>/checkpoints/step-000010/``: ``adapter.safetensors`` (the trainable LoRA weights by
parameter name), ``optimizer.safetensors`` (AdamW's moments and step counts, and torch's RNG
state), ``state.json`` (the step, the optimizer's hyper-parameters, the losses so far). A
checkpoint is written in a hidden sibling folder and renamed into place, so a kill while it is
written leaves the previous one as the latest.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

CHECKPOINTS_DIR = "checkpoints"
ADAPTER_FILE = "adapter.safetensors"
OPTIMIZER_FILE = "optimizer.safetensors"
STATE_FILE = "state.json"
_STEP = re.compile(r"^step-(\d+)$")
_RNG = "rng.torch"


@dataclass(frozen=True)
class Resumed:
    step: int
    losses: list[float]


def checkpoint_dir(out: Path, step: int) -> Path:
    return out / CHECKPOINTS_DIR / f"step-{step:06d}"


def checkpoints(out: Path) -> list[tuple[int, Path]]:
    """The complete checkpoints (a state file present), oldest first."""
    root = out / CHECKPOINTS_DIR
    if not root.is_dir():
        return []
    found = []
    for folder in root.iterdir():
        match = _STEP.match(folder.name)
        if match and (folder / STATE_FILE).is_file():
            found.append((int(match.group(1)), folder))
    return sorted(found)


def trainable(model: Any) -> dict[str, torch.Tensor]:
    return {n: p for n, p in model.named_parameters() if p.requires_grad}


def save_checkpoint(
    out: Path,
    step: int,
    model: Any,
    optimizer: torch.optim.Optimizer,
    losses: list[float],
    keep: int,
) -> Path:
    """Write the checkpoint of ``step`` atomically and drop all but the ``keep`` newest."""
    target = checkpoint_dir(out, step)
    building = target.with_name(f".{target.name}.building")
    shutil.rmtree(building, ignore_errors=True)
    building.mkdir(parents=True)
    save_file(
        {n: p.detach().clone().contiguous() for n, p in trainable(model).items()},
        str(building / ADAPTER_FILE),
    )
    state = optimizer.state_dict()
    tensors = {
        f"{index}.{key}": value.detach().clone().contiguous()
        for index, moments in state["state"].items()
        for key, value in moments.items()
    }
    tensors[_RNG] = torch.get_rng_state()
    save_file(tensors, str(building / OPTIMIZER_FILE))
    record = {"step": step, "param_groups": state["param_groups"], "losses": losses}
    (building / STATE_FILE).write_text(json.dumps(record, indent=2), encoding="utf-8")
    shutil.rmtree(target, ignore_errors=True)
    os.replace(building, target)
    for _, old in checkpoints(out)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return target


def load_checkpoint(folder: Path, model: Any, optimizer: torch.optim.Optimizer) -> Resumed:
    """Restore the adapters, the optimizer and the RNG from ``folder``."""
    weights = load_file(str(folder / ADAPTER_FILE))
    params = trainable(model)
    if set(weights) != set(params):
        raise ValueError(f"checkpoint {folder} holds other adapters than the model's")
    with torch.no_grad():
        for name, value in weights.items():
            params[name].copy_(value)
    tensors = load_file(str(folder / OPTIMIZER_FILE))
    torch.set_rng_state(tensors.pop(_RNG))
    record = json.loads((folder / STATE_FILE).read_text(encoding="utf-8"))
    moments: dict[int, dict[str, torch.Tensor]] = {}
    for key, value in tensors.items():
        index, _, name = key.partition(".")
        moments.setdefault(int(index), {})[name] = value
    optimizer.load_state_dict({"state": moments, "param_groups": record["param_groups"]})
    return Resumed(int(record["step"]), [float(x) for x in record["losses"]])
