"""Supply chain: the compromised LiteLLM releases can never be installed, setup installs
from hash-locked files, and nothing runs code at interpreter start-up from an unexpected
.pth file."""

from __future__ import annotations

import ast
import importlib.metadata
import sys
import sysconfig
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
COMPROMISED_LITELLM = ("1.82.7", "1.82.8")
# .pth files a normal install of this project creates: setuptools' distutils shim, the
# editable install of sago itself and that of the tests' example plug-in (the test targets
# install it from tests/plugin_package). Anything else executes unknown code at start-up.
EXPECTED_PTH = {
    "distutils-precedence.pth",
    "__editable__.sago-0.1.0.pth",
    "__editable__.sago_example_plugin-0.1.0.pth",
}


def test_the_compromised_litellm_releases_are_excluded_and_not_installed() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = [Requirement(r) for r in project["dependencies"] if r.startswith("litellm")]
    assert len(specs) == 1
    for bad in COMPROMISED_LITELLM:
        assert not specs[0].specifier.contains(bad), f"litellm {bad} would be allowed"
    assert importlib.metadata.version("litellm") not in COMPROMISED_LITELLM


def test_no_unexpected_pth_file_in_site_packages() -> None:
    site = Path(sysconfig.get_paths()["purelib"])
    found = {p.name for p in site.glob("*.pth")}
    assert found <= EXPECTED_PTH, f"unexpected start-up hooks: {sorted(found - EXPECTED_PTH)}"


def _locked(path: Path) -> dict[str, tuple[str, list[str]]]:
    """name -> (pinned version, sha256 hashes) of a pip-compile lock file."""
    entries: dict[str, tuple[str, list[str]]] = {}
    current = None
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("--hash=sha256:") and current:
            entries[current][1].append(line.split(":", 1)[1].rstrip(" \\"))
        elif "==" in line:
            name, version = line.rstrip(" \\").split("==", 1)
            current = name.lower().replace("_", "-")
            entries[current] = (version, [])
    return entries


def test_setup_installs_from_hash_locked_files() -> None:
    """`make setup` installs every dependency with --require-hashes from the lock files."""
    makefile = (ROOT / "Makefile").read_text()
    assert "--require-hashes -r requirements.lock" in makefile
    assert "--require-hashes -r requirements-models.lock" in makefile
    for lock in ("requirements.lock", "requirements-models.lock"):
        entries = _locked(ROOT / lock)
        assert entries and all(len(h) == 64 for _, hashes in entries.values() for h in hashes)
        assert all(hashes for _, hashes in entries.values()), f"{lock}: a pin without a hash"
    main = _locked(ROOT / "requirements.lock")
    assert main["litellm"][0] not in COMPROMISED_LITELLM
    assert "torch" not in main  # installed first, pinned, from the CPU build (see Makefile)
    gpu_only = [n for n in main if n.startswith(("nvidia-", "cuda-", "triton"))]
    assert not gpu_only, f"CUDA wheels in the CPU lock: {gpu_only}"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [
        Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["dev"]
    ]
    for requirement in wanted:
        if requirement.name != "torch":
            version, _ = main[requirement.name.lower()]
            assert requirement.specifier.contains(version), (requirement, version)


def test_the_installed_environment_matches_the_lock() -> None:
    for name, (version, _) in _locked(ROOT / "requirements.lock").items():
        assert importlib.metadata.version(name) == version, name


FIRST_PARTY = {"sago_core", "tasks", "flows"}  # the folders scanned
OWN_NAMES = FIRST_PARTY | {"sago"}  # the import names they are known by (sago.tasks, ...)
# Imported by sago but installed elsewhere on purpose: the reason is the declaration.
NOT_IN_THIS_ENVIRONMENT = {
    "vllm": "its own environment (make setup-vllm); only the worker imports it",
    "datasets": "the hub extra (pip install sago[hub]); imported only for hub: datasets",
}


def _third_party_imports() -> dict[str, set[str]]:
    """Top-level module -> files importing it, over sago_core/, tasks/ and flows/."""
    found: dict[str, set[str]] = {}
    for package in sorted(FIRST_PARTY):
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.partition(".")[0]
                    if top not in OWN_NAMES and top not in sys.stdlib_module_names:
                        found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def test_every_third_party_import_is_a_declared_dependency() -> None:
    """What the code imports is what pyproject.toml declares: an import that works only
    because another package happens to pull its distribution in breaks when that one moves."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project.get("optional-dependencies", {})
    declared = {
        canonicalize_name(Requirement(r).name)
        for r in [*project["dependencies"], *(r for group in extras.values() for r in group)]
    }
    distributions = importlib.metadata.packages_distributions()
    imports = _third_party_imports()
    assert {"polars", "prefect", "torch"} <= set(imports)  # the scan sees the code
    undeclared = {}
    for module, files in sorted(imports.items()):
        if module in NOT_IN_THIS_ENVIRONMENT:
            continue
        provided = {canonicalize_name(d) for d in distributions.get(module, [])}
        if not provided & declared:
            undeclared[module] = (sorted(provided) or "not installed", sorted(files))
    assert not undeclared, f"imported but not declared in pyproject.toml: {undeclared}"


def test_the_vllm_environment_gets_the_locked_pyarrow() -> None:
    """The vLLM worker writes Parquet that sago reads: `make setup-vllm` pins pyarrow to the
    main lock's version (the Makefile reads it from requirements.lock)."""
    makefile = (ROOT / "Makefile").read_text()
    assert "PYARROW_PIN  := $(shell grep -m1 '^pyarrow==' requirements.lock" in makefile
    assert "'$(VLLM_PACKAGE)' '$(PYARROW_PIN)'" in makefile
    assert _locked(ROOT / "requirements.lock")["pyarrow"][0]
