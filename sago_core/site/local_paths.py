"""What a published site says about where things are: a run by its id, the runs folder by
its name, any other file or folder of this machine by its own name; never an absolute path.

A site is made to be published, yet what it shows was written for the machine that made the
runs: a run's configuration holds its runs folder, the copied report names the file a scored
run read, a card names the folder of the run it was compared with, a refused pairing names
the ``scores.parquet`` it read. Every page the site writes passes through ``LocalPaths``,
which knows each such path of every run it shows (the one owner of that knowledge), so a page
added later is published the same way.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sago_core.config.places import local_paths as config_paths
from sago_core.config.places import public_url
from sago_core.site.collect import Site

# A path is replaced only where it stands whole: not after a path's own characters (the
# runs folder ``/runs`` inside the link ``../runs/demo-1/``), nor before them (``/runs2``).
# After a ``/`` it still is whole when no name precedes that ``/`` (``file:///runs``).
_BEFORE = r"(?<![\w.~-])(?<![\w.~-]/)"
_AFTER = r"(?![\w~-]|\.\w)"


@dataclass(frozen=True)
class LocalPaths:
    """(this machine's path, what a published page says instead), longest path first, so a
    run's folder is named by its id before its runs folder is named by its name."""

    replacements: tuple[tuple[str, str], ...]

    def text(self, text: str) -> str:
        for path, name in self.replacements:
            if path in text:  # the regex only where the plain test finds the path
                pattern = re.compile(_BEFORE + re.escape(path) + _AFTER)
                text = pattern.sub(name.replace("\\", "\\\\"), text)
        return text

    def page(self, data: bytes) -> bytes:
        return self.text(data.decode("utf-8", errors="surrogateescape")).encode(
            "utf-8", errors="surrogateescape"
        )


def _forms(path: str | Path) -> set[str]:
    """The ways a page may spell an absolute path: as given, resolved, HTML-escaped."""
    given = Path(path).expanduser()
    if not given.is_absolute():
        return set()
    forms = {str(given), str(given.resolve())}
    return forms | {html.escape(f, quote=True) for f in forms}


def _named(pairs: dict[str, str], path: Any, name: str | None = None) -> None:
    if not isinstance(path, str | Path) or not str(path).strip() or "://" in str(path):
        return  # nothing, or a store's URL: an address, not this machine's path
    for form in _forms(path):
        pairs.setdefault(form, name if name is not None else Path(path).name)


def _config_paths(pairs: dict[str, str], config: dict[str, Any]) -> None:
    """Every path of this machine a run configuration names (its places, dataset files,
    data and encoder folders, local model folders), as the config's owner lists them."""
    for path in config_paths(config):
        _named(pairs, path)
    for url in _urls(config):  # an API address with a password or key in it
        for form in (url, html.escape(url, quote=True)):
            pairs.setdefault(form, public_url(url))


def _urls(value: Any) -> Iterator[str]:
    """Every URL among a config's values that carries more than ``public_url`` shows."""
    if isinstance(value, dict | list):
        for item in value.values() if isinstance(value, dict) else value:
            yield from _urls(item)
    elif isinstance(value, str) and "://" in value and public_url(value) != value:
        yield value


def local_paths(site: Site) -> LocalPaths:
    """The replacements for every page of ``site``: each run's folder by its id (also where
    it lies resolved, or is named in a card as the run compared with), the runs folder by
    its name, the places of each configuration, a scored run's input file by its name."""
    pairs: dict[str, str] = {}
    for run in site.runs.values():
        _named(pairs, run.folder.resolve(), run.run_id)
    _named(pairs, site.root.resolve())
    for run in site.runs.values():
        _config_paths(pairs, run.config)
        for path in run.quoted_paths:
            _named(pairs, path)
    ordered = sorted(pairs.items(), key=lambda item: len(item[0]), reverse=True)
    return LocalPaths(tuple(ordered))
