"""One real Prefect server for the reliability suite: every subprocess run talks to it,
so no run pays for starting an ephemeral server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.prefect_server import prefect_server


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Everything here is part of the reliability suite (``pytest -m reliability``)."""
    for item in items:
        if "tests/reliability/" in str(item.fspath):
            item.add_marker(pytest.mark.reliability)


@pytest.fixture(scope="package")
def server_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    with prefect_server(tmp_path_factory.mktemp("reliability-prefect")) as env:
        yield {**env, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
