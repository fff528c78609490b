"""Whether the vLLM environment exists; ``SAGO_REQUIRE_VLLM=1`` (set by .ci/run after
``make setup-vllm``) turns its absence into a failure instead of a skip."""

from __future__ import annotations

import os

import pytest

from sago_core.backends.vllm_backend import vllm_python
from sago_core.config import VllmSettings
from sago_core.errors import ConfigError


def require_vllm() -> str:
    try:
        return vllm_python(VllmSettings())
    except ConfigError as exc:
        if os.environ.get("SAGO_REQUIRE_VLLM") == "1":
            pytest.fail(f"SAGO_REQUIRE_VLLM=1 but {exc}")
        pytest.skip(str(exc))
