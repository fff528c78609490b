"""Plug-ins are read when a registry is first used, and only then: building the command line
imports none (a broken plug-in warns only on a command that needs its registry), and a cache
key that asks a plug-in's version reads the plug-in's group first. Both use the example
plug-in installed into the test environment (tests/plugin_package)."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version

from sago_core.registry import plugins


def test_building_the_command_line_imports_no_plugin() -> None:
    code = (
        "import sys\n"
        "from sago_cli.main import build_parser\n"
        "build_parser()\n"
        "assert 'sago_example_plugin' not in sys.modules, 'the parser imported a plug-in'\n"
        "from sago_core.registry.backends import backend_names\n"
        "assert 'echo' in backend_names(), 'the example plug-in is not installed'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_plugins_version_is_known_before_its_registry_is_used() -> None:
    with plugins.reloaded():  # no registry has read its group yet
        assert plugins.BACKENDS not in plugins._registries
        expected = f"sago-example-plugin {version('sago-example-plugin')}"
        assert plugins.version_of(plugins.BACKENDS, "echo") == expected
        assert plugins.version_of(plugins.VARIANT_FAMILIES, "emphasis") == expected
        assert plugins.version_of(plugins.AXES, "loud") is None  # no such plug-in: none
