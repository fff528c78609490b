"""The built wheel installs nothing outside the ``sago`` name space, and what it installs
imports from itself alone: ``flows/`` and ``tasks/`` ship as ``sago.flows`` and
``sago.tasks`` (generic top-level names like ``tasks`` belong to nobody)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # setuptools stages the build in the repository's build/, and a file left there by an
    # earlier build (a module since removed) would ride into this wheel
    shutil.rmtree(REPO / "build", ignore_errors=True)
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    subprocess.run(
        [*pip_wheel, "-q", "-w", str(out), str(REPO)],
        check=True,
        capture_output=True,
    )
    shutil.rmtree(REPO / "build", ignore_errors=True)
    (built,) = out.glob("sago-*.whl")
    return built


def test_every_top_level_import_package_starts_with_sago(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    packages = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert packages == {"sago", "sago_cli", "sago_core"}
    assert "sago/flows/evaluate.py" in names
    assert "sago/flows/runtime/device_worker.py" in names
    assert "sago/tasks/caching.py" in names
    assert "sago_core/refusal/openings/README.md" in names  # package data rides along


def test_the_wheel_imports_no_top_level_flows_or_tasks(wheel: Path) -> None:
    found = []
    archive = zipfile.ZipFile(wheel)
    for name in archive.namelist():
        if not name.endswith(".py"):
            continue
        for node in ast.walk(ast.parse(archive.read(name))):
            roots = []
            if isinstance(node, ast.Import):
                roots = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                roots = [node.module.split(".")[0]]
            found += [f"{name}:{node.lineno}" for root in roots if root in {"flows", "tasks"}]
    assert not found


def test_the_unpacked_wheel_runs_without_the_repository(wheel: Path, tmp_path: Path) -> None:
    zipfile.ZipFile(wheel).extractall(tmp_path / "site")
    probe = (
        "import sago.flows.evaluate, sago.tasks.caching as c, sago_cli.main;"
        "print(sago.flows.evaluate.__file__);"
        "print(len(c.code_version('sago.tasks.metrics')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path / "site"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    where, digest_length = done.stdout.split()
    assert Path(where).is_relative_to(tmp_path / "site")
    assert digest_length == "64"
