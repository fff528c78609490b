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


def test_a_request_timing_that_holds_403_is_not_read_as_access_refused() -> None:
    # The client's words for a missing bucket, as a CI run saw them: its timing, 2.403376 ms,
    # once read as a 403 and sent the user after their credentials.
    from sago_core.storage.objects import _hint

    location = parse_store_url("s3://no-such-bucket/runs")
    missing = Exception(
        "Generic S3 error: Error performing list request: Error performing GET "
        "http://127.0.0.1:41753/no-such-bucket?list-type=2&prefix=runs%2F in 2.403376ms - "
        'Server returned non-2xx status code: 404 Not Found: <?xml version="1.0"?>'
    )
    assert "bucket 'no-such-bucket' does not exist" in _hint(location, missing)
    refused = Exception("Server returned non-2xx status code: 403 Forbidden in 1.404ms")
    assert "access refused" in _hint(location, refused)
