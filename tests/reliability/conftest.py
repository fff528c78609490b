"""The reliability suite's marker. Its runs talk to the one real Prefect server of
``tests/conftest.py`` (``server_env``)."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Everything here is part of the reliability suite (``pytest -m reliability``)."""
    for item in items:
        if "tests/reliability/" in str(item.fspath):
            item.add_marker(pytest.mark.reliability)
