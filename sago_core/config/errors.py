"""A configuration's validation errors in one line each, naming the key; a mistyped key
gets the nearest allowed key at its place ("did you mean 'generation'?")."""

from __future__ import annotations

import difflib
import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError


def describe_errors(exc: ValidationError, model: type[BaseModel]) -> str:
    """``a.b: message; c: message``, with a suggestion for every unknown key."""
    problems = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"])
        message = error["msg"]
        if error["type"] == "extra_forbidden":
            message = "unknown key" + _suggestion(model, error["loc"])
        problems.append(f"{where}: {message}")
    return "; ".join(problems)


def _suggestion(model: type[BaseModel], loc: tuple[int | str, ...]) -> str:
    """The key as written elsewhere in the configuration (a key at the wrong level: "did
    you mean 'generation.max_new_tokens'?"), else the nearest key at its place, else the
    nearest key anywhere, else the keys allowed at its place."""
    owner = _model_at(model, loc[:-1])
    if owner is None:
        return ""
    key = str(loc[-1])
    here = ".".join(str(part) for part in loc[:-1] if not isinstance(part, int))
    elsewhere = {
        path: path.rsplit(".", 1)[-1]
        for path in key_paths(model)
        if path.rpartition(".")[0] != here
    }
    moved = sorted(path for path, name in elsewhere.items() if name == key)
    if moved:
        return f"; it belongs in another section: did you mean {moved[0]!r}?"
    allowed = allowed_keys(owner)
    found = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
    if found:
        return f"; did you mean {found[0]!r}?"
    near = difflib.get_close_matches(key, list(elsewhere.values()), n=1, cutoff=0.8)
    if near:
        path = min(path for path, name in elsewhere.items() if name == near[0])
        return f"; did you mean {path!r}?"
    return f" (allowed: {', '.join(allowed)})"


def key_paths(model: type[BaseModel], prefix: str = "", depth: int = 4) -> list[str]:
    """Every key of ``model`` and of the sections below it, as dotted paths."""
    paths = []
    for key in allowed_keys(model):
        paths.append(prefix + key)
        field = model.model_fields.get(key) or next(
            (f for f in model.model_fields.values() if f.alias == key), None
        )
        nested = _nested_model(field.annotation) if field is not None else None
        if nested is not None and depth > 0:
            paths += key_paths(nested, f"{prefix}{key}.", depth - 1)
    return paths


def allowed_keys(model: type[BaseModel]) -> list[str]:
    """The keys a mapping for ``model`` may hold: field names and their aliases."""
    keys = []
    for name, field in model.model_fields.items():
        keys.append(field.alias or name)
        if field.alias and field.alias != name:
            keys.append(name)
    return sorted(set(keys))


def _model_at(model: type[BaseModel], path: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model class that validates the mapping at ``path`` below ``model`` (None: the
    path leaves the models, e.g. through a plain dict)."""
    current: Any = model
    for part in path:
        if isinstance(part, int):  # an item of a list or tuple: its element's model
            current = _nested_model(current, items=True)
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        fields = {(f.alias or n): f for n, f in current.model_fields.items()}
        field = current.model_fields.get(part) or fields.get(part)
        if field is None:
            return None
        current = field.annotation
        nested = _nested_model(current)
        current = nested if nested is not None else current
    if isinstance(current, type) and issubclass(current, BaseModel):
        return current
    return _nested_model(current)


def _nested_model(annotation: Any, items: bool = False) -> Any:
    """The first BaseModel class inside an annotation (Optional, unions, containers)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin is None and not isinstance(annotation, types.UnionType):
        return None
    for arg in typing.get_args(annotation):
        found = _nested_model(arg)
        if found is not None:
            return found
    return None
