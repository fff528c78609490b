"""Whether the train extra (peft, trl) is installed; ``SAGO_REQUIRE_TRAIN=1`` (set by .ci/run,
which installs requirements-train.lock) turns its absence into a failure instead of a skip."""

from __future__ import annotations

import importlib.util
import os

import pytest


def require_train() -> None:
    missing = [name for name in ("peft", "trl") if importlib.util.find_spec(name) is None]
    if not missing:
        return
    reason = f"the train extra is not installed ({', '.join(missing)} missing)"
    if os.environ.get("SAGO_REQUIRE_TRAIN") == "1":
        pytest.fail(f"SAGO_REQUIRE_TRAIN=1 but {reason}")
    pytest.skip(reason)
