"""Supply chain: the compromised LiteLLM releases can never be installed, and nothing runs
code at interpreter start-up from an unexpected .pth file."""

from __future__ import annotations

import importlib.metadata
import sysconfig
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
COMPROMISED_LITELLM = ("1.82.7", "1.82.8")
# .pth files a normal install of this project creates: setuptools' distutils shim and the
# editable install of sago itself. Anything else executes unknown code at start-up.
EXPECTED_PTH = {"distutils-precedence.pth", "__editable__.sago-0.1.0.pth"}


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
