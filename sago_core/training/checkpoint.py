"""Training checkpoints: everything a killed training needs to continue as if it had never
stopped, in safetensors and JSON (no pickle).

``<out>/checkpoints/step-000010/``: ``adapter.safetensors`` (the trainable LoRA weights by
parameter name), ``optimizer.safetensors`` (AdamW's moments and step counts, and torch's RNG
state), ``state.json`` (the step, the optimizer's hyper-parameters, the losses so far). Each
file is written atomically and ``state.json`` last: a folder without it (a kill while the
checkpoint was written) is not a checkpoint, and the previous one stays the newest. With an
object store attached (``sago train --out s3://...``) every file is also put on the store,
and the checkpoints are listed from the store, so another machine resumes where this stopped.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sago_core.artifacts.store import atomic_write_bytes, write_json
from sago_core.storage import attached

if TYPE_CHECKING:
    import torch

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
    """The complete checkpoints (a state file present), oldest first; those on the attached
    store fetched first."""
    root = out / CHECKPOINTS_DIR
    attached.pull(root)
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
    """Write the checkpoint of ``step`` (``state.json`` last) and drop all but the ``keep``
    newest."""
    import torch
    from safetensors.torch import save

    target = checkpoint_dir(out, step)
    weights = {n: p.detach().clone().contiguous() for n, p in trainable(model).items()}
    atomic_write_bytes(target / ADAPTER_FILE, save(weights))
    state = optimizer.state_dict()
    tensors = {
        f"{index}.{key}": value.detach().clone().contiguous()
        for index, moments in state["state"].items()
        for key, value in moments.items()
    }
    tensors[_RNG] = torch.get_rng_state()
    atomic_write_bytes(target / OPTIMIZER_FILE, save(tensors))
    write_json(
        {"step": step, "param_groups": state["param_groups"], "losses": losses}, target / STATE_FILE
    )
    for _, old in checkpoints(out)[:-keep]:
        for name in (STATE_FILE, ADAPTER_FILE, OPTIMIZER_FILE):  # its marker first
            attached.remove(old / name)
        shutil.rmtree(old, ignore_errors=True)
    return target


def load_checkpoint(folder: Path, model: Any, optimizer: torch.optim.Optimizer) -> Resumed:
    """Restore the adapters, the optimizer and the RNG from ``folder``."""
    import torch
    from safetensors.torch import load_file

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
