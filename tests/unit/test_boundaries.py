"""Layering: the contract in ``.importlinter`` (import-linter, over every module) holds, it
can fail, and importing sago_core loads neither Prefect nor a model library.

import-linter checks the import graph (lazy imports included): the layers
``sago_cli | bench -> sago (the API -> flows -> tasks) -> sago_core``, flows above
``flows.runtime``, storage
below artifacts, Prefect-free sago_core, torch-free math, no cycle. What it cannot express
is checked here at run time: importing every sago_core module (lazy imports not taken)
loads none of Prefect, torch, transformers, vllm or litellm.
"""

from __future__ import annotations

import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import sago_core

ROOT = Path(__file__).resolve().parents[2]
# sago/ holds the links to flows/ and tasks/ (sago.flows, sago.tasks): copied as links
PACKAGES = ("sago_cli", "bench", "sago", "flows", "tasks", "sago_core")
HEAVY = ("prefect", "torch", "transformers", "vllm", "litellm")


def lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    """The venv's ``lint-imports`` (beside this interpreter) over ``cwd``'s .importlinter."""
    binary = Path(sys.executable).with_name("lint-imports")
    assert binary.is_file(), f"{binary} missing: import-linter is a dev dependency"
    return subprocess.run(
        [str(binary), "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def verdicts(output: str) -> dict[str, str]:
    """Contract name -> KEPT / BROKEN, from lint-imports' report (names may wrap lines)."""
    section = output.split("Contracts\n", 1)[-1].split("Contracts:", 1)[0]
    text = " ".join(section.split())
    names = [line.split(" = ", 1)[1] for line in _config_lines() if line.startswith("name = ")]
    found = {}
    for name in names:
        for verdict in ("KEPT", "BROKEN"):
            if f"{' '.join(name.split())} {verdict}" in text:
                found[name] = verdict
    return found


def _config_lines() -> list[str]:
    return (ROOT / ".importlinter").read_text(encoding="utf-8").splitlines()


def contract_names() -> dict[str, str]:
    """Section id (``house``, ``storage``, ...) -> the contract's name."""
    ids: dict[str, str] = {}
    current = None
    for line in _config_lines():
        if line.startswith("[importlinter:contract:"):
            current = line.removeprefix("[importlinter:contract:").rstrip("]")
        elif current and line.startswith("name = "):
            ids[current] = line.split(" = ", 1)[1]
    return ids


def test_the_layering_contract_holds() -> None:
    done = lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    names = contract_names()
    found = verdicts(done.stdout)
    assert set(names) >= {"house", "flows", "cli", "storage", "prefect-free", "torch-free-math"}
    assert "acyclic" in names
    assert all(found.get(name) == "KEPT" for name in names.values()), found


# One violation per contract, written into a copy of the packages: (file, line, contract).
VIOLATIONS = [
    ("sago_core/errors.py", "import sago.flows.evaluate", "house"),
    ("tasks/stage.py", "import sago.flows.evaluate", "api"),  # a task above its flows
    ("flows/runtime/devices.py", "import sago.flows.evaluate", "flows"),
    ("flows/new_flow.py", "X = 1", "flows"),  # a module no layer names (exhaustive)
    ("sago_cli/common.py", "import sago_cli.run", "cli"),
    ("sago_core/storage/atomic.py", "import sago_core.artifacts.layout", "storage"),
    ("sago_core/errors.py", "import prefect", "prefect-free"),
    ("sago_core/scoring/deltas.py", "import torch", "torch-free-math"),
    ("tasks/caching.py", "import sago.tasks.stage", "acyclic"),  # stage imports caching
]


@pytest.fixture(scope="module")
def copied_packages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's packages and contract, copied (Python files only)."""
    root = tmp_path_factory.mktemp("house")
    for package in PACKAGES:
        shutil.copytree(
            ROOT / package,
            root / package,
            symlinks=True,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
        )
    shutil.copy(ROOT / ".importlinter", root / ".importlinter")
    return root


@pytest.mark.parametrize(("path", "line", "contract"), VIOLATIONS)
def test_a_broken_contract_fails(
    copied_packages: Path, tmp_path: Path, path: str, line: str, contract: str
) -> None:
    root = tmp_path / "house"
    shutil.copytree(copied_packages, root, symlinks=True)
    target = root / path
    before = target.read_text(encoding="utf-8") if target.exists() else ""
    target.write_text(before + f"\n{line}  # injected\n", encoding="utf-8")
    done = lint_imports(root)
    assert done.returncode != 0, done.stdout
    name = contract_names()[contract]
    assert verdicts(done.stdout).get(name) == "BROKEN", done.stdout


def test_importing_sago_core_loads_no_prefect_and_no_model_library(tmp_path: Path) -> None:
    """Every sago_core module at once: the model libraries and Prefect stay lazy."""
    modules = ["sago_core"] + [
        m.name for m in pkgutil.walk_packages(sago_core.__path__, "sago_core.")
    ]
    assert len(modules) > 100  # every module, not a hand-picked list
    out = tmp_path / "loaded.txt"  # not stdout: the vLLM worker module takes fd 1 on import
    code = (
        "import importlib, pathlib, sys\n"
        f"for m in {modules!r}:\n"
        "    importlib.import_module(m)\n"
        "loaded = sorted({n.split('.')[0] for n in sys.modules})\n"
        "pathlib.Path(sys.argv[1]).write_text(','.join(loaded))"
    )
    subprocess.run([sys.executable, "-c", code, str(out)], check=True, cwd=ROOT)
    loaded = set(out.read_text().split(","))
    assert "sago_core" in loaded and "polars" in loaded  # the probe saw real imports
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))
