"""The examples one objective trains on, read from a ``sago export --training`` folder and
checked row by row (a bad row is refused with its file, row and field)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sago_core.backends.model_source import sha256_file
from sago_core.data.jsonl import numbered_records
from sago_core.errors import ConfigError, InputError
from sago_core.training.card import CARD_FILE, data_file
from sago_core.training.config import CONSISTENCY_OBJECTIVE, DPO_OBJECTIVE, TrainConfig

Messages = list[dict[str, str]]


@dataclass(frozen=True)
class Example:
    """One training example: the (variant) prompt and the target answer; ``base_prompt``
    for the consistency objective, ``rejected`` for dpo."""

    prompt: Messages
    answer: str
    base_prompt: Messages | None = None
    rejected: str | None = None


def _messages(value: Any, field: str, file: str, row: int) -> Messages:
    ok = (
        isinstance(value, list)
        and value
        and all(
            isinstance(m, dict)
            and set(m) >= {"role", "content"}
            and isinstance(m["role"], str)
            and isinstance(m["content"], str)
            for m in value
        )
    )
    if not ok:
        raise InputError(
            "must be a non-empty list of {role, content} messages", file=file, row=row, column=field
        )
    return [{"role": m["role"], "content": m["content"]} for m in value]


def _answer(value: Any, field: str, file: str, row: int) -> str:
    messages = _messages(value, field, file, row)
    if len(messages) != 1 or messages[0]["role"] != "assistant" or not messages[0]["content"]:
        raise InputError(
            "must be one non-empty assistant message", file=file, row=row, column=field
        )
    return messages[0]["content"]


def data_path(config: TrainConfig) -> Path:
    """The export file the objective reads; refused when the folder is not an export."""
    folder = config.data
    if not (folder / CARD_FILE).is_file():
        raise ConfigError(f"{folder}: not a `sago export training` folder (no {CARD_FILE})")
    path = folder / data_file(config.objective)  # each objective reads the kind named after it
    if not path.is_file() and config.objective == CONSISTENCY_OBJECTIVE:
        path = folder / data_file("pairs")  # an export written before the kind took that name
    if not path.is_file():
        raise ConfigError(
            f"{folder}: objective {config.objective} reads {data_file(config.objective)}; export "
            f"it with `sago export training RUN --kind {config.objective} --out {folder}`"
        )
    return path


def data_identity(config: TrainConfig) -> str:
    return f"sha256:{sha256_file(data_path(config))}"


def load_examples(config: TrainConfig) -> list[Example]:
    """Every example of the objective's export file, in file order."""
    path = data_path(config)
    file = str(path)
    examples = []
    for row, record in numbered_records(path.read_text(encoding="utf-8"), file):
        prompt = _messages(record.get("prompt"), "prompt", file, row)
        if config.objective == DPO_OBJECTIVE:
            examples.append(
                Example(
                    prompt,
                    _answer(record.get("chosen"), "chosen", file, row),
                    rejected=_answer(record.get("rejected"), "rejected", file, row),
                )
            )
            continue
        answer = _answer(record.get("completion"), "completion", file, row)
        base = None
        if config.objective == CONSISTENCY_OBJECTIVE:
            base = _messages(record.get("base_prompt"), "base_prompt", file, row)
        examples.append(Example(prompt, answer, base_prompt=base))
    if not examples:
        raise InputError("holds no example", file=file)
    return examples
