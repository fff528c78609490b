"""A run configuration as it may be shown away from this machine: a published site, an
exported results folder, an experiment tracker.

A saved config (``manifest.json``'s ``config``, plain JSON) says where the run was written
(``RunConfig.PLACE_FIELDS``), names this machine's files and folders (``PATH_FIELDS``: a
dataset file, a data folder, an encoder folder) and local model folders (``MODEL_FIELDS``:
``hf:/home/me/judge``), and may hold a URL with a password or a key in it (``api.base_url``).
``local_paths`` lists the absolute paths among them (what a page must scrub);
``public_config`` is the config without its places, each such path named by its last part
(the way the site names a folder), and every URL without its user, password and query.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from sago_core.config.run import RunConfig, current_names, parallel_entry
from sago_core.registry.backends import local_backends

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>()\[\]]+")


def _values(config: Mapping[str, Any], dotted: str) -> Iterator[str]:
    """The string values at ``dotted`` (each item of a list)."""
    node: Any = config
    for key in dotted.split("."):
        if not isinstance(node, Mapping):
            return
        node = node.get(key)
    for item in node if isinstance(node, list | tuple) else [node]:
        if isinstance(item, str) and item.strip():
            yield item


def _is_local(path: str) -> bool:
    return "://" not in path and Path(path.strip()).expanduser().is_absolute()


def _path_in(value: str) -> str | None:
    """The absolute path a path field's value names: the value itself, a dataset entry's
    file before its ``#mapping``, or the file after a parallel layout (``mkqa:FILE``)."""
    try:
        parallel = parallel_entry(value)
    except ValueError:
        parallel = None
    path = parallel[1].as_posix() if parallel else value.partition("#")[0].strip()
    return path if _is_local(path) else None


def _model_path_in(value: str) -> str | None:
    """The folder a local model spec (``hf:/home/me/model``) names; None for a hub id, an
    API model or a name that is no spec. The backend registry says which backends load
    local weights."""
    backend, sep, model_id = value.partition(":")
    if not sep or backend not in local_backends():
        return None
    return model_id.strip() if _is_local(model_id) else None


def local_paths(config: Mapping[str, Any]) -> list[str]:
    """Every absolute path of this machine that ``config`` names: its places (runs folder,
    Prefect home), its path fields and its local models' folders. A config saved before a
    field was renamed is read under both names."""
    views: tuple[Mapping[str, Any], ...]
    try:
        views = (config, current_names(dict(config)))
    except ValueError:  # both names at once: each is read as it stands
        views = (config,)
    found: list[str] = []
    for view in views:
        found += [v for f in sorted(RunConfig.PLACE_FIELDS) for v in _values(view, f)]
        for field in RunConfig.PATH_FIELDS:
            found += [p for v in _values(view, field) if (p := _path_in(v)) is not None]
        for field in RunConfig.MODEL_FIELDS:
            found += [p for v in _values(view, field) if (p := _model_path_in(v)) is not None]
    return list(dict.fromkeys(p for p in found if _is_local(p)))


def public_model(name: str) -> str:
    """A model as a published page names it: a local model's folder by its last part
    (``hf:/home/me/models/m1`` -> ``hf:m1``); any other name as it is."""
    folder = _model_path_in(name)
    return name.replace(folder, Path(folder).expanduser().name) if folder else name


def public_url(text: str) -> str:
    """``text`` without a URL's user, password, query and fragment
    (``https://u:pw@host/v1?key=k`` -> ``https://host/v1``); other text as it is."""
    if "://" not in text:
        return text
    try:
        parts = urlsplit(text.strip())
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "<an unreadable URL>"
    netloc = f"{host}:{port}" if port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def public_text(text: str) -> str:
    """``text`` (an error message, a warning) with each URL in it as ``public_url`` gives
    it."""
    return _URL.sub(lambda match: public_url(match.group(0)), text)


def _public(value: Any, names: dict[str, str]) -> Any:
    if isinstance(value, Mapping):
        return {k: _public(v, names) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_public(v, names) for v in value]
    if not isinstance(value, str):
        return value
    for path in sorted(names, key=len, reverse=True):
        value = value.replace(path, names[path])
    return public_url(value)


def public_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` without its places (``RunConfig.PLACE_FIELDS``); each local path it names
    by its last part (``/home/me/q.csv#answer=a`` -> ``q.csv#answer=a``, ``hf:/home/me/judge``
    -> ``hf:judge``); each URL without credentials or query (``public_url``)."""
    kept = {k: v for k, v in config.items() if k not in RunConfig.PLACE_FIELDS}
    names = {p: Path(p).expanduser().name or p for p in local_paths(kept)}
    return dict(_public(kept, names))
