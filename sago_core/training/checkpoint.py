"""Training checkpoints: the Trainer's own checkpoint folders, with every file it would pickle
written in safetensors and JSON instead, and mirrored to an object store.

``<out>/checkpoints/checkpoint-10/``: ``adapter_model.safetensors`` (peft's adapters),
``optimizer.safetensors`` (AdamW's moments by parameter index), ``optimizer.json`` (its
parameter groups and the learning-rate schedule's state), ``rng.safetensors`` (torch's
generators: the data order and dropout draw on them alone), ``trainer_state.json`` (the step and
the losses so far). The Trainer writes ``trainer_state.json`` last, so a folder without it (a
kill while the checkpoint was written) is not a checkpoint and the previous one stays the
newest. With an object store attached (``sago train --out s3://...``) every file is put on
the store as well, ``trainer_state.json`` last, and the checkpoints are listed from the store,
so another machine resumes where this one stopped.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sago_core.artifacts.store import atomic_write_bytes, write_json
from sago_core.storage import attached

if TYPE_CHECKING:
    from transformers import TrainerCallback

CHECKPOINTS_DIR = "checkpoints"
STATE_FILE = "trainer_state.json"
OPTIMIZER_FILE = "optimizer.safetensors"
OPTIMIZER_STATE_FILE = "optimizer.json"
# What transformers pickles beside a checkpoint; never kept.
_PICKLED = ("training_args.bin",)
_STEP = re.compile(r"^checkpoint-(\d+)$")


def checkpoint_root(out: Path) -> Path:
    return out / CHECKPOINTS_DIR


def checkpoints(out: Path) -> list[tuple[int, Path]]:
    """The complete checkpoints (a state file present), oldest first; those on the attached
    store fetched first."""
    root = checkpoint_root(out)
    attached.pull(root)
    if not root.is_dir():
        return []
    found = []
    for folder in root.iterdir():
        match = _STEP.match(folder.name)
        if match and (folder / STATE_FILE).is_file():
            found.append((int(match.group(1)), folder))
    return sorted(found)


def newest_checkpoint(out: Path) -> Path | None:
    found = checkpoints(out)
    return found[-1][1] if found else None


class SafetensorsCheckpoints:
    """A Trainer mixin (listed before the Trainer class) that saves and restores the
    optimizer, the schedule and the generators without pickle."""

    args: Any
    optimizer: Any
    lr_scheduler: Any

    def _save_optimizer_and_scheduler(self, output_dir: str) -> None:
        from safetensors.torch import save

        if not self.args.should_save:
            return
        state = self.optimizer.state_dict()
        tensors = {
            f"{index}.{key}": value.detach().clone().contiguous()
            for index, moments in state["state"].items()
            for key, value in moments.items()
        }
        folder = Path(output_dir)
        atomic_write_bytes(folder / OPTIMIZER_FILE, save(tensors))
        schedule = {k: v for k, v in self.lr_scheduler.state_dict().items() if k != "lr_lambdas"}
        write_json(
            {"param_groups": state["param_groups"], "schedule": schedule},
            folder / OPTIMIZER_STATE_FILE,
        )

    def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
        import torch
        from safetensors.torch import load_file

        if checkpoint is None:
            return
        folder = Path(checkpoint)
        record = json.loads((folder / OPTIMIZER_STATE_FILE).read_text(encoding="utf-8"))
        moments: dict[int, dict[str, torch.Tensor]] = {}
        for key, value in load_file(str(folder / OPTIMIZER_FILE)).items():
            index, _, name = key.partition(".")
            moments.setdefault(int(index), {})[name] = value
        self.optimizer.load_state_dict({"state": moments, "param_groups": record["param_groups"]})
        self.lr_scheduler.load_state_dict({**record["schedule"], "lr_lambdas": [None]})

    def _rng_file(self, folder: Path) -> Path:
        # one per process when several train together (each has its own generators)
        rank = f"-{self.args.process_index}" if self.args.world_size > 1 else ""
        return folder / f"rng{rank}.safetensors"

    def _save_rng_state(self, output_dir: str) -> None:
        import torch
        from safetensors.torch import save

        tensors = {"cpu": torch.get_rng_state()}
        if torch.cuda.is_available():
            tensors |= {f"cuda.{i}": s for i, s in enumerate(torch.cuda.get_rng_state_all())}
        atomic_write_bytes(self._rng_file(Path(output_dir)), save(tensors))

    def _load_rng_state(self, checkpoint: str | None) -> None:
        import torch
        from safetensors.torch import load_file

        if checkpoint is None or not self._rng_file(Path(checkpoint)).is_file():
            return
        tensors = load_file(str(self._rng_file(Path(checkpoint))))
        torch.set_rng_state(tensors.pop("cpu"))
        if tensors and torch.cuda.is_available():
            torch.cuda.set_rng_state_all([tensors[f"cuda.{i}"] for i in range(len(tensors))])

    def _save(self, output_dir: str | None = None, state_dict: Any = None) -> None:
        super()._save(output_dir, state_dict)  # type: ignore[misc]
        for name in _PICKLED:
            Path(output_dir or self.args.output_dir, name).unlink(missing_ok=True)


def store_mirror() -> TrainerCallback:
    """A callback that puts every checkpoint on the attached store (its state file last) and
    drops from the store those the Trainer rotated out."""
    from transformers import TrainerCallback

    class _Mirror(TrainerCallback):
        def __init__(self) -> None:
            self.pushed: dict[Path, list[Path]] = {}

        def on_save(self, args: Any, state: Any, control: Any, **_: Any) -> None:
            mirror = attached.current()
            if mirror is None or not state.is_world_process_zero:
                return
            folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name != STATE_FILE)
            for path in [*files, folder / STATE_FILE]:
                mirror.push(path, path.read_bytes())
            self.pushed[folder] = files
            for old in [f for f in self.pushed if not f.exists()]:
                for path in [old / STATE_FILE, *self.pushed.pop(old)]:  # its marker first
                    attached.remove(path)

    return _Mirror()
