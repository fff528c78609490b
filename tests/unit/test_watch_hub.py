"""`sago-watch` over the hub: huggingface_hub's real client against a local stand-in for
the hub API (no network here), so the query sago sends and the specs it returns are tested."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from sago_core.watch.registry import discover_models


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    queries: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            return

        def do_GET(self) -> None:
            url = urlparse(self.path)
            queries.append({"path": url.path, **parse_qs(url.query)})
            models = [{"id": "acme/tiny-2", "modelId": "acme/tiny-2"}, {"id": "acme/tiny-1"}]
            body = json.dumps(models if url.path == "/api/models" else {}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    try:
        yield queries
    finally:
        server.shutdown()


def test_hub_watch_lists_an_organisations_models_newest_first(
    hub: list[dict[str, Any]],
) -> None:
    assert discover_models("hub:acme/tiny") == ["hf:acme/tiny-2", "hf:acme/tiny-1"]
    (query,) = [q for q in hub if q["path"] == "/api/models"]
    assert query["author"] == ["acme"] and query["search"] == ["tiny"]
    assert query["sort"] == ["createdAt"]


def test_hub_watch_without_a_pattern_asks_for_the_whole_organisation(
    hub: list[dict[str, Any]],
) -> None:
    assert len(discover_models("hub:acme")) == 2
    (query,) = [q for q in hub if q["path"] == "/api/models"]
    assert "search" not in query and query["author"] == ["acme"]
