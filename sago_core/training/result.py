"""The result folder of ``sago train`` and what it records.

```
<out>/
  training.json    provenance: base model and its identity, the data and its card, the
                   objective, every hyper-parameter, the code version; the losses at the end
  checkpoints/     step-N/ (checkpoint.py): what resume continues from
  adapter/         the LoRA adapters (peft's own format)
  model/           base + adapters merged: `hf:<out>/model` evaluates it like any model
  README.md        the checkpoint's card
```
A folder holds one training: starting again on a folder whose recorded training differs (any
setting, the base model or the data) is refused; the same training resumes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sago_core.artifacts.store import write_json, write_text
from sago_core.errors import ConfigError
from sago_core.storage import attached
from sago_core.training.card import CARD_FILE
from sago_core.training.config import TrainConfig

PROVENANCE_FILE = "training.json"
ADAPTER_DIR = "adapter"
MODEL_DIR = "model"
# What must match for a folder to resume (the rest, such as the code version, may move).
_SAME = ("base_model", "base_identity", "data_identity", "settings")


def model_dir(out: Path) -> Path:
    return out / MODEL_DIR


def begin(
    config: TrainConfig, *, base_identity: str, data_identity: str, code: str
) -> dict[str, Any]:
    """The provenance of this training, written to ``out``; refused when ``out`` holds
    another training or other files."""
    record: dict[str, Any] = {
        "base_model": config.model,
        "base_identity": base_identity,
        "data": str(config.data.resolve()),
        "data_identity": data_identity,
        "data_card": str((config.data / CARD_FILE).resolve()),
        "objective": config.objective,
        "settings": config.settings(),
        "code_version": code,
        "status": "training",
    }
    path = config.out / PROVENANCE_FILE
    if attached.ensure_local(path):
        before = json.loads(path.read_text(encoding="utf-8"))
        for key in _SAME:
            if before.get(key) != record[key]:
                raise ConfigError(
                    f"--out {config.out} holds another training ({key} differs): choose a new "
                    "folder, or repeat the same command to resume it"
                )
        record = {**before, "code_version": code}
    elif config.out.exists() and (not config.out.is_dir() or any(config.out.iterdir())):
        raise ConfigError(f"--out {config.out}: not empty and not a sago training folder")
    write_json(record, path)
    return record


def finish(
    model: Any,
    tokenizer: Any,
    config: TrainConfig,
    record: dict[str, Any],
    losses: list[float],
) -> Path:
    """Save the adapters and the merged model, complete the provenance, write the card."""
    out = config.out
    model.save_pretrained(str(out / ADAPTER_DIR))
    merged = model.merge_and_unload()
    merged.save_pretrained(str(model_dir(out)), safe_serialization=True)
    tokenizer.save_pretrained(str(model_dir(out)))
    _push(out / ADAPTER_DIR)
    _push(model_dir(out))
    done = {**record, "status": "done", "steps": len(losses), "losses": losses}
    write_json(done, out / PROVENANCE_FILE)
    write_text(model_card(done), out / CARD_FILE)
    return model_dir(out)


def _push(folder: Path) -> None:
    """Put the files of ``folder`` (written by peft or transformers) on the attached store."""
    mirror = attached.current()
    if mirror is None:
        return
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            mirror.push(path, path.read_bytes())


def model_card(record: dict[str, Any]) -> str:
    """The checkpoint's card: what it is, from the provenance alone."""
    settings = record["settings"]
    losses = record.get("losses") or []
    rows = [f"| {k} | {v} |" for k, v in sorted(settings.items())]
    first = f"{losses[0]:.4f}" if losses else "NA (no step recorded)"
    last = f"{losses[-1]:.4f}" if losses else "NA (no step recorded)"
    return "\n".join(
        [
            f"# LoRA {record['objective']} fine-tune of {record['base_model']}",
            "",
            f"- base model: `{record['base_model']}` ({record['base_identity']})",
            f"- data: `{record['data']}` ({record['data_identity']}); its card: "
            f"`{record['data_card']}`",
            f"- code version: {record['code_version']}",
            f"- steps: {len(losses)}; loss at the first step {first}, at the last {last}",
            "- evaluate it: `sago run --models hf:<this folder>/model ...`",
            "",
            "## Settings",
            "",
            "| setting | value |",
            "|---|---|",
            *rows,
            "",
        ]
    )


TRANSFER_HEADING = "## Transfer report"


def training_folder(model_spec: str) -> Path | None:
    """The ``sago train`` folder whose merged model ``model_spec`` (``hf:<out>/model``)
    evaluates, or None for any other model."""
    _, _, where = model_spec.partition(":")
    folder = Path(where).expanduser().parent
    if Path(where).name != MODEL_DIR or not (folder / PROVENANCE_FILE).is_file():
        return None
    return folder


def training_data(folder: Path) -> Path:
    """The export folder a training read (its provenance says)."""
    record = json.loads((folder / PROVENANCE_FILE).read_text(encoding="utf-8"))
    return Path(record["data"])


def add_transfer_to_card(folder: Path, report: str) -> Path:
    """The checkpoint's card with the transfer report as its last section (replacing an
    earlier one)."""
    card = folder / CARD_FILE
    text = card.read_text(encoding="utf-8") if card.is_file() else ""
    text = text.split(TRANSFER_HEADING, 1)[0].rstrip("\n")
    body = report.split("\n", 1)[1] if report.startswith("# ") else report
    return write_text(f"{text}\n\n{TRANSFER_HEADING}\n{body}", card)
