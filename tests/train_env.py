"""Whether the train extra (peft, trl) is installed; ``SAGO_REQUIRE_TRAIN=1`` (set by .ci/run,
which installs requirements-train.lock) turns its absence into a failure instead of a skip."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import pytest


def require_train() -> None:
    missing = [name for name in ("peft", "trl") if importlib.util.find_spec(name) is None]
    if not missing:
        return
    reason = f"the train extra is not installed ({', '.join(missing)} missing)"
    if os.environ.get("SAGO_REQUIRE_TRAIN") == "1":
        pytest.fail(f"SAGO_REQUIRE_TRAIN=1 but {reason}")
    pytest.skip(reason)


QUESTIONS = [
    ("What is the capital of France?", "What is the capital of France, please?", "Paris."),
    ("How many legs has a spider?", "how many legs has a spider", "Eight."),
    ("Who wrote Hamlet?", "Who  wrote Hamlet?", "Shakespeare."),
]


def _user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def _assistant(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


def _write(folder: Path, name: str, rows: list[dict[str, Any]]) -> None:
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def write_export(folder: Path) -> Path:
    """A `sago export --training` folder written by hand: three questions, each with a
    rewording, in the sft, consistency and dpo formats, and a card."""
    folder.mkdir(parents=True)
    (folder / "README.md").write_text("# sago training data: hand-written\n", encoding="utf-8")
    _write(
        folder,
        "sft.jsonl",
        [{"prompt": _user(v), "completion": _assistant(a)} for _, v, a in QUESTIONS],
    )
    _write(
        folder,
        "consistency.jsonl",
        [
            {"prompt": _user(v), "completion": _assistant(a), "base_prompt": _user(b)}
            for b, v, a in QUESTIONS
        ],
    )
    _write(
        folder,
        "dpo.jsonl",
        [
            {"prompt": _user(v), "chosen": _assistant(a), "rejected": _assistant("I don't know.")}
            for _, v, a in QUESTIONS
        ],
    )
    return folder
