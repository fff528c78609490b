from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import pytest

from tests.storage.s3_server import create_bucket, s3_server, store_environment

_buckets = itertools.count()


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with s3_server(tmp_path_factory.mktemp("moto") / "moto.log") as endpoint:
        yield endpoint


@pytest.fixture
def s3_env(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """This process (and the subprocesses it starts) pointed at the test server."""
    env = store_environment(s3_endpoint)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


@pytest.fixture
def bucket(s3_env: dict[str, str], s3_endpoint: str) -> str:
    """A fresh, empty bucket for one test, named apart from another test process's (the
    scratch mirror of a bucket is named by its URL, and two xdist workers share a home)."""
    name = f"sago-test-{os.getpid()}-{next(_buckets)}"
    create_bucket(s3_endpoint, name)
    return name
