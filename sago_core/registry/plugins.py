"""Plug-ins: backends, variant families, axes and refusal rubrics from other installed packages.

A distribution extends sago by declaring entry points in the groups of ``GROUPS``; each one
names the same declaration a built-in uses (``BackendSpec``, ``FamilySpec``, ``AxisSpec``,
``Rubric``), and its entry point's name is the declaration's name (the word a user types).
A registry reads its group once, on its first use (never when sago_core is imported, so a
slow or broken plug-in costs nothing to a command that does not need that registry).

A plug-in that fails (it does not import, names the wrong kind of object, breaks a naming
rule, or takes a name that is built in or another plug-in's) is skipped with one
``PluginWarning`` naming its distribution, its entry point and what is wrong: sago keeps
working for whoever does not use it, and a run that names it fails with that same reason
(``failure``). Two plug-ins that claim one name are both refused: neither silently wins.
"""

from __future__ import annotations

import importlib
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Generic, Protocol, TypeVar

T = TypeVar("T")


class _Named(Protocol):
    @property
    def name(self) -> str: ...


N = TypeVar("N", bound=_Named)

BACKENDS = "sago.backends"
VARIANT_FAMILIES = "sago.variant_families"
AXES = "sago.axes"
REFUSAL_RUBRICS = "sago.refusal_rubrics"
# group -> what one of its declarations is called in messages
GROUPS: dict[str, str] = {
    BACKENDS: "backend",
    VARIANT_FAMILIES: "variant family",
    AXES: "axis",
    REFUSAL_RUBRICS: "refusal rubric",
}
BUILT_IN = "built in"


class PluginWarning(UserWarning):
    """A plug-in was skipped; the message says which and why."""


_lock = threading.RLock()
_registries: dict[str, dict[str, Any]] = {}  # group -> the registry it was loaded into
_reading: set[str] = set()
_origins: dict[tuple[str, str], str] = {}  # (group, name) -> the plug-in that declared it
_failures: dict[tuple[str, str], str] = {}  # (group, name) -> why that plug-in was skipped
_versions: dict[tuple[str, str], str] = {}  # (group, name) -> "DISTRIBUTION VERSION"


def _origin(entry: EntryPoint) -> str:
    """``plug-in DIST (entry point GROUP: NAME = VALUE)``: what a message names."""
    dist = entry.dist.name if entry.dist is not None else "of an unnamed distribution"
    return f"plug-in {dist} (entry point {entry.group}: {entry.name} = {entry.value})"


def load_group(
    group: str, kind: type[T], registry: dict[str, T], check: Callable[[T], None]
) -> None:
    """Register every declaration of ``group``'s entry points into ``registry``, once.

    ``kind``: the declaration's type; ``check``: the registry's own rule for a declaration
    (raises ValueError), the same one a built-in passes.
    """
    if group in _registries:  # read already: no lock on the registries' every lookup
        return
    with _lock:
        # _reading: this thread is reading the group and a plug-in's import asked its registry
        if group in _registries or group in _reading:
            return
        _reading.add(group)
        try:
            _read(group, kind, registry, check)
        finally:
            _reading.discard(group)
            _registries[group] = registry


def _read(group: str, kind: type[T], registry: dict[str, T], check: Callable[[T], None]) -> None:
    for entry in entry_points(group=group):
        origin = _origin(entry)
        try:
            declared = entry.load()
            if not isinstance(declared, kind):
                raise TypeError(f"names a {type(declared).__name__}, not a {kind.__name__}")
            name = getattr(declared, "name", None)
            if name != entry.name:
                raise ValueError(
                    f"declares the {GROUPS[group]} {name!r} under the entry point name "
                    f"{entry.name!r}: the two must be the same word"
                )
            check(declared)
        except Exception as error:  # any failure of someone else's code: skip it
            _refuse(group, entry.name, f"{origin}: {type(error).__name__}: {error}")
            continue
        if not _clashes(group, entry.name, origin, registry):
            registry[entry.name] = declared
            _origins[(group, entry.name)] = origin
            if entry.dist is not None:
                _versions[(group, entry.name)] = f"{entry.dist.name} {entry.dist.version}"


def _clashes(group: str, name: str, origin: str, registry: dict[str, Any]) -> bool:
    """Whether ``name`` is taken (refused, with the warning naming both claimants): by a
    built-in (kept), by another plug-in (both refused), or by plug-ins refused already."""
    noun = GROUPS[group]
    if (group, name) in _failures:
        why = f"{origin} also declares the refused {noun} {name!r}: {_failures[(group, name)]}"
        _refuse(group, name, why, keep_failure=False)
        return True
    if name not in registry:
        return False
    other = _origins.pop((group, name), BUILT_IN)
    if other == BUILT_IN:
        why = f"{origin} declares the {noun} {name!r}, which is built in; the built-in is kept"
        _refuse(group, name, why, keep_failure=False)
        return True
    del registry[name]
    _versions.pop((group, name), None)
    why = f"{origin} and {other} both declare the {noun} {name!r}; neither is used"
    _refuse(group, name, why)
    return True


def _refuse(group: str, name: str, why: str, keep_failure: bool = True) -> None:
    if keep_failure:
        _failures[(group, name)] = why
    warnings.warn(f"sago skipped a {GROUPS[group]}: {why}", PluginWarning, stacklevel=4)


def failure(group: str, name: str) -> str | None:
    """Why the plug-in declaring ``name`` in ``group`` was skipped (None: none was)."""
    return _failures.get((group, name))


def unknown(group: str, name: str, known: tuple[str, ...]) -> str:
    """The message for a name that is not registered: the plug-in's failure, if one
    declared it, else the registered names."""
    why = failure(group, name)
    if why is not None:
        return f"{GROUPS[group]} {name!r} comes from a plug-in that failed to load: {why}"
    return f"{GROUPS[group]} {name!r} is not one of {known}"


def resolve(declared: str | Callable[..., Any]) -> Any:
    """A declaration's ``"package.module:function"``, imported only now (or the function)."""
    if not isinstance(declared, str):
        return declared
    module, _, function = declared.partition(":")
    return getattr(importlib.import_module(module), function)


class Registry(Generic[N]):
    """One kind's declarations by name, in registration order: the built-ins, then the
    plug-ins of ``group``, read on the first lookup; ``check`` is the kind's naming rule."""

    def __init__(
        self, group: str, kind: type[N], check: Callable[[N], None], builtin: Iterable[N]
    ) -> None:
        self.group, self.kind, self.check = group, kind, check
        self.entries: dict[str, N] = {}
        for spec in builtin:  # straight in: registering through the checks reads the plug-ins
            check(spec)
            self.entries[spec.name] = spec

    def loaded(self) -> dict[str, N]:
        load_group(self.group, self.kind, self.entries, self.check)
        return self.entries

    def register(self, spec: N) -> N:
        if spec.name in self.loaded():
            raise ValueError(f"{GROUPS[self.group]} {spec.name!r} is already registered")
        self.check(spec)
        self.entries[spec.name] = spec
        return spec

    def unregister(self, name: str) -> None:
        self.entries.pop(name)

    @contextmanager
    def registered(self, spec: N) -> Iterator[N]:
        """``spec`` registered for the ``with`` block only (tests, plug-ins tried out)."""
        self.register(spec)
        try:
            yield spec
        finally:
            self.unregister(spec.name)

    def get(self, name: str, error: type[Exception] = ValueError) -> N:
        """The declaration ``name``; else ``error`` naming the plug-in's failure or the names."""
        try:
            return self.loaded()[name]
        except KeyError:
            raise error(unknown(self.group, name, tuple(self.entries))) from None


# group -> the registry function that reads it (imported when asked: those modules import
# this one)
READERS: dict[str, tuple[str, str]] = {
    BACKENDS: ("sago_core.registry.backends", "backend_names"),
    VARIANT_FAMILIES: ("sago_core.registry.families", "families"),
    AXES: ("sago_core.registry.axes", "axis_names"),
    REFUSAL_RUBRICS: ("sago_core.registry.rubrics", "rubric_names"),
}


def version_of(group: str, name: str) -> str | None:
    """``"DISTRIBUTION VERSION"`` of the plug-in that declared ``name`` (None: built in).
    Caches key a plug-in's work by it: sago's own code is in its stages' keys, a plug-in's
    is not, so a new version of a plug-in recomputes what it builds or answers. The group is
    read first: a key made before its registry's first use would otherwise leave the
    version out and reuse an older version's work."""
    if group not in _registries:
        module, reader = READERS[group]
        getattr(importlib.import_module(module), reader)()
    return _versions.get((group, name))


def distributions() -> dict[str, str]:
    """Every installed distribution with an entry point in sago's groups, and its version,
    whether or not a registry has read it yet (a run's manifest records them)."""
    found = {
        entry.dist.name: entry.dist.version
        for group in GROUPS
        for entry in entry_points(group=group)
        if entry.dist is not None
    }
    return dict(sorted(found.items()))


def forget() -> None:
    """Unregister every plug-in declaration and read the entry points again on next use
    (tests; a session that installed a package after sago's registries were used)."""
    with _lock:
        for group, name in _origins:
            _registries[group].pop(name, None)
        _registries.clear()
        _origins.clear()
        _failures.clear()
        _versions.clear()


@contextmanager
def reloaded() -> Iterator[None]:
    """The entry points read afresh inside the ``with`` block, and again after it (tests
    that put a distribution on ``sys.path``)."""
    forget()
    try:
        yield
    finally:
        forget()
