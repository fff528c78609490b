"""A real S3-compatible server on 127.0.0.1 for the object-storage tests: the moto server
(installed by ``make setup`` from the dev extras), started and stopped by the tests, its
requests served one at a time (``serial_moto.py``: S3's conditional puts are atomic, moto's
threaded server's are not)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

SERIAL_MOTO = str(Path(__file__).with_name("serial_moto.py"))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def store_environment(endpoint: str) -> dict[str, str]:
    """The provider's standard variables, as a user would set them for MinIO or moto."""
    return {
        "AWS_ACCESS_KEY_ID": "sago-test",
        "AWS_SECRET_ACCESS_KEY": "sago-test-secret",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ALLOW_HTTP": "true",
    }


@contextlib.contextmanager
def s3_server(log: Path, require_auth: bool = False) -> Iterator[str]:
    """The endpoint URL of a fresh moto server; ``require_auth``: unknown keys are refused."""
    port = free_port()
    env = {**os.environ, **({"INITIAL_NO_AUTH_ACTION_COUNT": "0"} if require_auth else {})}
    with log.open("w") as out:
        server = subprocess.Popen(
            [sys.executable, SERIAL_MOTO, "127.0.0.1", str(port)], stdout=out, stderr=out, env=env
        )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=2).close()
                break
            except OSError as exc:
                if server.poll() is not None or time.monotonic() > deadline:
                    tail = log.read_text()[-2000:]
                    raise RuntimeError(f"moto server did not start: {tail}") from exc
                time.sleep(0.2)
        yield endpoint
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()


def create_bucket(endpoint: str, name: str) -> None:
    import boto3

    env = store_environment(endpoint)
    boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        region_name="us-east-1",
    ).create_bucket(Bucket=name)


def s3_client(endpoint: str):  # type: ignore[no-untyped-def]
    import boto3

    env = store_environment(endpoint)
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        region_name="us-east-1",
    )
