"""Plug-ins enter the registries through entry points: each test puts a throwaway
distribution (a ``.dist-info`` folder and a module) on ``sys.path`` and reads the entry points
afresh. A good plug-in's backend, family, axis and rubric are registered like built-in ones;
a broken one, or one whose name is taken, is skipped with one warning naming the
distribution and the entry point, and naming it in a configuration is an error saying why."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from sago_core.backends.target import cache_fingerprint, model_target
from sago_core.config import RunConfig, VariantGrid
from sago_core.registry import families as family_registry
from sago_core.registry import plugins
from sago_core.registry.axes import axis_names
from sago_core.registry.backends import backend_names, backend_spec
from sago_core.registry.families import FamilySpec, family_spec
from sago_core.registry.rubrics import rubric_named
from tests.fakes import PROMPTS

DECLARATIONS = """
from sago_core.registry.axes import AxisSpec
from sago_core.registry.backends import BackendSpec
from sago_core.registry.families import FamilySpec
from sago_core.registry.rubrics import Rubric

def twice(text, subtype, strength, position, rng):
    return text + " " + text

SHOUT = BackendSpec("shout", "sago_core.backends.mock:open_target", "none")
MOCK = BackendSpec("mock", "sago_core.backends.mock:open_target", "none")
TWICE = FamilySpec("twice", ("whole",), transform=twice, strengths=(1,))
NOT_A_SPEC = {"name": "dicty"}
MISNAMED = BackendSpec("other", "x:y", "none")
LOUD = AxisSpec("loud", 1.0, "x:y", 0.0)
TERSE = Rubric("terse", "terse-v1", "{request} -> {response}?")
"""


@pytest.fixture
def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """``install(dist, {group: {name: "attribute" or "module:attribute"}})``: a distribution
    whose entry points name attributes of one module of declarations; the registries read
    the entry points afresh inside the test and again after it."""
    module = f"plug_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(DECLARATIONS)
    monkeypatch.syspath_prepend(str(tmp_path))

    def make(dist: str, groups: dict[str, dict[str, str]]) -> None:
        info = tmp_path / f"{dist.replace('-', '_')}-0.1.dist-info"  # as wheels name it
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
        lines = []
        for group, entries in groups.items():
            lines.append(f"[{group}]")
            lines += [
                f"{name} = {value if ':' in value else f'{module}:{value}'}"
                for name, value in entries.items()
            ]
        (info / "entry_points.txt").write_text("\n".join(lines) + "\n")

    with plugins.reloaded():
        yield make


def _warned(call: object) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert callable(call)
        call()
    return [str(w.message) for w in caught if issubclass(w.category, plugins.PluginWarning)]


def test_a_plugins_declarations_are_registered_like_built_in_ones(install: object) -> None:
    assert callable(install)
    install(
        "sago-good",
        {
            plugins.BACKENDS: {"shout": "SHOUT"},
            plugins.VARIANT_FAMILIES: {"twice": "TWICE"},
            plugins.AXES: {"loud": "LOUD"},
            plugins.REFUSAL_RUBRICS: {"terse": "TERSE"},
        },
    )
    assert _warned(backend_names) == []
    assert "shout" in backend_names() and RunConfig(models=("shout:m",)).models == ("shout:m",)
    assert plugins.version_of(plugins.BACKENDS, "shout") == "sago-good 0.1"
    assert plugins.version_of(plugins.BACKENDS, "mock") is None  # built in
    grid = VariantGrid.model_validate({"families": {"twice": {}}})
    cells = grid.families["twice"]
    assert (cells.subtypes, cells.strengths, cells.positions) == (("whole",), (1.0,), ("global",))
    # the plug-in's version keys its work: recorded with the family's cells and in the
    # backend's cache fingerprint (a built-in backend's fingerprint is as it was)
    assert cells.plugin == "sago-good 0.1" and plugins.distributions()["sago-good"] == "0.1"
    config = RunConfig(models=("shout:m", "mock:m"))
    assert json.loads(cache_fingerprint(model_target(config, "shout:m")))["plugin"] == (
        "sago-good 0.1"
    )
    assert "plugin" not in json.loads(cache_fingerprint(model_target(config, "mock:m")))
    transform = family_spec("twice").transformer()
    assert transform("a b", "whole", 1.0, "global", random.Random(0)) == "a b a b"
    assert "loud" in axis_names() and rubric_named("terse").version == "terse-v1"


def test_a_broken_plugin_warns_once_and_its_name_then_says_why(install: object) -> None:
    assert callable(install)
    install(
        "sago-broken",
        {plugins.BACKENDS: {"gone": "no_such_module_anywhere:SPEC", "shout": "SHOUT"}},
    )
    first = _warned(backend_names)
    assert len(first) == 1, first
    assert (
        "plug-in sago-broken (entry point sago.backends: gone = no_such_module_anywhere"
        in (first[0])
    )
    assert "ModuleNotFoundError" in first[0]
    assert _warned(backend_names) == []  # read once: no second warning
    assert "shout" in backend_names() and "gone" not in backend_names()  # the rest still works
    with pytest.raises(ValidationError, match="its plug-in failed to load: plug-in sago-broken"):
        RunConfig(models=("gone:m",))
    assert RunConfig(models=("mock:m",)).models == ("mock:m",)  # a user not naming it: fine


@pytest.mark.parametrize(
    ("entry", "value", "why"),
    [
        ("dicty", "NOT_A_SPEC", "names a dict, not a BackendSpec"),
        ("shoutier", "SHOUT", "declares the backend 'shout' under the entry point name"),
        ("bad:name", "MISNAMED", "declares the backend 'other'"),
    ],
)
def test_a_declaration_of_the_wrong_kind_or_name_is_refused(
    install: object, entry: str, value: str, why: str
) -> None:
    assert callable(install)
    install("sago-odd", {plugins.BACKENDS: {entry: value}})
    (message,) = _warned(backend_names)
    assert "plug-in sago-odd" in message and why in message
    assert entry not in backend_names()


def test_a_name_that_is_built_in_keeps_the_built_in_one(install: object) -> None:
    assert callable(install)
    install("sago-mocker", {plugins.BACKENDS: {"mock": "MOCK"}})
    (message,) = _warned(backend_names)
    assert "plug-in sago-mocker" in message and "which is built in" in message
    assert backend_spec("mock").summary == "deterministic test backend, no weights"


def test_two_plugins_claiming_one_name_are_both_refused_naming_both(install: object) -> None:
    assert callable(install)
    install("sago-left", {plugins.VARIANT_FAMILIES: {"twice": "TWICE"}})
    install("sago-right", {plugins.VARIANT_FAMILIES: {"twice": "TWICE"}})
    (message,) = _warned(lambda: family_spec("noise"))
    assert "plug-in sago-left" in message and "plug-in sago-right" in message
    with pytest.raises(ValidationError) as error:
        VariantGrid.model_validate({"families": {"twice": {}}})
    assert "sago-left" in str(error.value) and "sago-right" in str(error.value)


def test_a_built_in_family_is_not_configured_as_a_declared_one() -> None:
    with pytest.raises(ValidationError, match=r"'noise' is configured as variants\.noise"):
        VariantGrid.model_validate({"families": {"noise": {}}})
    with pytest.raises(ValidationError, match="variant family 'nope' is not one of"):
        VariantGrid.model_validate({"families": {"nope": {}}})


def test_importing_sago_core_reads_no_entry_point() -> None:
    code = (
        "import sys, sago_core.config, sago_core.run_plan, sago_core.variants.grid\n"
        "assert 'sago_example_plugin' not in sys.modules\n"
        "from sago_core.registry.backends import backend_names\n"
        "assert 'echo' in backend_names() and 'sago_example_plugin' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def _reverse_words(text: str, subtype: str, strength: float, position: str, rng: object) -> str:
    return " ".join(reversed(text.split()))


def test_a_declared_family_is_built_by_the_grid_and_filtered_as_declared() -> None:
    from sago_core.stages.variants import build_variant_candidates, filter_variants

    spec = FamilySpec("reversed", ("words",), True, _reverse_words, strengths=(1,))
    with family_registry.registered(spec):
        grid = VariantGrid.model_validate(
            {
                "register": None,
                "noise": None,
                "structural": None,
                "replay": False,
                "families": {"reversed": {}},
            }
        )
        candidates = build_variant_candidates(PROMPTS, grid, seed=0)
        assert candidates.select("prompt_id", "variant_id", "family", "text").rows() == [
            ("p1", "reversed:words:1:global", "reversed", "France? of capital the is What"),
            ("p2", "reversed:words:1:global", "reversed", "Hamlet? play the wrote Who"),
        ]
        # declared filtered: the semantic filter scores it (here every score is 0.25)
        kept = filter_variants(candidates, PROMPTS, lambda texts, _: [0.25] * len(texts), 0.5)
        assert kept["kept"].to_list() == [False, False]
        assert kept["reject_reason"].to_list() == ["semantic score 0.25 <= threshold 0.5"] * 2
    with pytest.raises(ValidationError, match="'reversed' is not one of"):
        VariantGrid.model_validate({"families": {"reversed": {}}})
