"""What every section of the configuration is built on: the strict, frozen base model (an
unknown key is an error, a parsed section never changes) and the check of a model spec."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from sago_core.registry import plugins
from sago_core.registry.backends import backend_names


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def check_model_spec(spec: str) -> str:
    """``spec`` if it reads BACKEND:ID with a registered BACKEND; else a ValueError."""
    backend, sep, model_id = spec.partition(":")
    if not sep or not model_id.strip():
        raise ValueError(
            f"model spec {spec!r} must look like BACKEND:ID with BACKEND one of {backend_names()}"
        )
    if backend not in backend_names():
        failed = plugins.failure(plugins.BACKENDS, backend)
        raise ValueError(
            f"model spec {spec!r}: unknown backend {backend!r} ("
            + (f"its plug-in failed to load: {failed}" if failed else "known: ")
            + ("" if failed else ", ".join(backend_names()))
            + ")"
        )
    return spec


def renamed_key(data: Any, old: str, new: str, where: str = "") -> Any:
    """``data`` with a key given under its old name ``old`` moved to ``new``: a saved run's
    configuration and an older file keep validating, with the same meaning. Both names at
    once is an error naming the new one, so no value is silently dropped."""
    if not isinstance(data, dict) or old not in data:
        return data
    if new in data:
        raise ValueError(f"{where}{old} is the old name of {where}{new}; give only {where}{new}")
    moved = {key: value for key, value in data.items() if key != old}
    moved[new] = data[old]
    return moved
