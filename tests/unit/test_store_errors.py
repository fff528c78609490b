"""Store errors say their cause and the fix, not the client's words."""

from __future__ import annotations

import pytest

from sago_core.storage.location import parse_store_url
from sago_core.storage.objects import StoreError
from sago_core.storage.preflight import check_store


def test_a_plain_http_endpoint_without_allow_http_names_the_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The client refuses plain http before connecting: no server is needed to see it.
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.delenv("AWS_ALLOW_HTTP", raising=False)
    with pytest.raises(StoreError) as refused:
        check_store(parse_store_url("s3://sago-http-check/runs"))
    message = str(refused.value)
    assert message.startswith("s3://sago-http-check/runs: the endpoint is plain http")
    assert "Set AWS_ALLOW_HTTP=true" in message
