"""A small OpenAI-compatible chat server on 127.0.0.1 for tests: real HTTP, scriptable faults.

Answers are deterministic functions of the request. A script is a list of rules tried in
order; the first rule whose ``match`` is a substring of the last user message (``*`` for
any) and that has uses left decides the reply:

    ok | delay (seconds, then ok) | 429 (with Retry-After) | 401_echo (echoes the
    Authorization header in its body and headers) | 500 | 502 | 503 | malformed
    (not JSON) | truncated (JSON cut in half) | error_body (200 with an error object) |
    empty (content "") | length (finish_reason "length") | hang (never answers in time) |
    close (drops the connection)

Judge requests (containing "Answer YES or NO") are answered YES when the response under
review ("Response B") holds a courtesy word, else NO, unless a rule says otherwise.

``first: N`` limits a rule to the first N attempts of each distinct request (a transient
fault: the request succeeds once it is retried enough).

Counters: every request is counted by a key of (model, messages), with its arrival times;
GET /_stats returns the counts.

Identity: every completion names the requested model and a ``system_fingerprint``
(``fp_sago_a`` unless set). ``drift(after=N, fingerprint=..., model=...)`` makes every
completion after the first N answered ones report another fingerprint (and, if given,
another served model name): a provider updating a model behind its alias mid-run.
Run in-process (``ScriptedServer``) or as a process (``python -m tests.openai_server``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

COURTESY = re.compile(r"\b(please|thank|kindly|appreciate|grateful)", re.IGNORECASE)


@dataclass
class Rule:
    action: str
    match: str = "*"
    times: int | None = None  # None: always
    retry_after: float | None = None
    delay: float = 0.0
    first: int | None = None  # only the first N attempts of each distinct request

    def applies(self, text: str, attempt: int) -> bool:
        if self.first is not None and attempt > self.first:
            return False
        return (self.times is None or self.times > 0) and (self.match == "*" or self.match in text)


@dataclass
class State:
    rules: list[Rule] = field(default_factory=list)
    calls: Counter = field(default_factory=Counter)
    actions: Counter = field(default_factory=Counter)
    arrivals: dict[str, list[float]] = field(default_factory=dict)  # key -> monotonic times
    credentials: Counter = field(default_factory=Counter)  # Authorization headers received
    # Every request as received: model, characters of its messages, max_tokens asked for.
    received: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    fingerprint: str = "fp_sago_a"
    served_model: str | None = None  # None: the requested name
    answered: int = 0
    drift_after: int | None = None
    drift_to: tuple[str, str | None] = ("fp_sago_b", None)

    def identity(self, requested: str) -> tuple[str, str]:
        """(served model, fingerprint) of the next completion; counts it as answered."""
        with self.lock:
            self.answered += 1
            if self.drift_after is not None and self.answered > self.drift_after:
                self.fingerprint, model = self.drift_to
                self.served_model = model or self.served_model
            return self.served_model or requested, self.fingerprint

    def choose(self, text: str, attempt: int = 1) -> Rule:
        with self.lock:
            for rule in self.rules:
                if rule.applies(text, attempt):
                    if rule.times is not None:
                        rule.times -= 1
                    self.actions[rule.action] += 1
                    return rule
            self.actions["ok"] += 1
            return Rule("ok")


def request_key(model: str, messages: list[dict[str, Any]]) -> str:
    payload = json.dumps([model, messages], sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def answer_for(text: str) -> str:
    """Deterministic and sensitive to the wording, like a real model at T=0."""
    if "Answer YES or NO" in text:
        under_review = text.split("Response B:", 1)[-1]
        return "YES" if COURTESY.search(under_review) else "NO"
    words = re.findall(r"[A-Za-z]+", text)
    digest = int(hashlib.sha256(text.encode()).hexdigest(), 16)
    topic = " ".join(words[-4:]) if words else "that"
    polite = " Thank you for asking!" if COURTESY.search(text) else ""
    return f"About {topic}: the answer is number {digest % 97}.{polite}"


def _completion(
    model: str, content: str, finish: str, prompt: str, fingerprint: str = "fp_sago_a"
) -> dict[str, Any]:
    return {
        "id": "chatcmpl-" + hashlib.sha256(prompt.encode()).hexdigest()[:12],
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "system_fingerprint": fingerprint,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish,
            }
        ],
        "usage": {
            "prompt_tokens": len(prompt.split()),
            "completion_tokens": len(content.split()),
            "total_tokens": len(prompt.split()) + len(content.split()),
        },
    }


def make_handler(state: State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return

        def _send(self, code: int, body: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path == "/_stats":
                with state.lock:
                    body = {
                        "total": sum(state.calls.values()),
                        "calls": dict(state.calls),
                        "actions": dict(state.actions),
                    }
                self._send(200, json.dumps(body).encode())
            else:
                self._send(404, b'{"error": "not found"}')

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if self.path == "/_script":
                rules = [Rule(**r) for r in json.loads(raw)]
                with state.lock:
                    state.rules = rules
                self._send(200, b"{}")
                return
            if not self.path.endswith("/chat/completions"):
                self._send(404, b'{"error": {"message": "no such route"}}')
                return
            request = json.loads(raw)
            model, messages = request.get("model", ""), request.get("messages", [])
            text = str(messages[-1].get("content", "")) if messages else ""
            key = request_key(model, messages)
            with state.lock:
                state.credentials[self.headers.get("Authorization", "")] += 1
                state.calls[key] += 1
                state.arrivals.setdefault(key, []).append(time.monotonic())
                state.received.append(
                    {
                        "model": model,
                        "chars": sum(len(str(m.get("content", ""))) for m in messages),
                        "max_tokens": request.get("max_tokens"),
                    }
                )
                attempt = state.calls[key]
            self._reply(state.choose(text, attempt), model, text)

        def _reply(self, rule: Rule, model: str, text: str) -> None:
            action = rule.action
            if action == "delay":
                time.sleep(rule.delay)
                action = "ok"
            if action == "hang":
                time.sleep(rule.delay or 30)
                action = "ok"
            if action == "close":
                self.close_connection = True
                self.connection.shutdown(2)
                return
            if action == "429":
                headers = {"Retry-After": f"{rule.retry_after or 1}"}
                error = {"error": {"message": "rate limited", "type": "rate_limit"}}
                self._send(429, json.dumps(error).encode(), headers)
                return
            if action == "401_echo":  # a careless upstream that echoes the credential back
                auth = self.headers.get("Authorization", "")
                error = {"error": {"message": f"invalid key in header: {auth}", "type": "auth"}}
                self._send(401, json.dumps(error).encode(), {"WWW-Authenticate": auth})
                return
            if action in ("500", "502", "503"):
                error = {"error": {"message": f"server error {action}", "type": "server"}}
                self._send(int(action), json.dumps(error).encode())
                return
            content = answer_for(text)
            served, fingerprint = state.identity(model)
            body = _completion(served, content, "stop", text, fingerprint)
            if action == "malformed":
                self._send(200, b"<html>upstream proxy error</html>")
            elif action == "truncated":
                encoded = json.dumps(body).encode()
                self._send(200, encoded[: len(encoded) // 2])
            elif action == "error_body":
                error = {"error": {"message": "model overloaded", "type": "server_error"}}
                self._send(200, json.dumps(error).encode())
            elif action == "empty":
                self._send(200, json.dumps(_completion(model, "", "stop", text)).encode())
            elif action == "length":
                cut = " ".join(content.split()[:3])
                self._send(200, json.dumps(_completion(model, cut, "length", text)).encode())
            else:
                self._send(200, json.dumps(body).encode())

    return Handler


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that timed out and left is part of the script, not an error."""
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class ScriptedServer:
    """``with ScriptedServer(rules) as server: server.base_url`` (a real socket)."""

    def __init__(self, rules: list[Rule] | None = None, port: int = 0) -> None:
        self.state = State(rules=list(rules or []))
        self.httpd = _QuietServer(("127.0.0.1", port), make_handler(self.state))
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def script(self, rules: list[Rule]) -> None:
        with self.state.lock:
            self.state.rules = list(rules)

    def drift(self, after: int, fingerprint: str, model: str | None = None) -> None:
        """Completions after the first ``after`` answered ones report ``fingerprint`` (and
        ``model`` as the served name, when given)."""
        with self.state.lock:
            self.state.drift_after = after
            self.state.drift_to = (fingerprint, model)

    def total_calls(self) -> int:
        with self.state.lock:
            return sum(self.state.calls.values())

    def __enter__(self) -> ScriptedServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file", type=Path, required=True)
    parser.add_argument("--rules", type=Path, help="a JSON list of rules to start with")
    args = parser.parse_args()
    rules = [Rule(**r) for r in json.loads(args.rules.read_text())] if args.rules else []
    server = ScriptedServer(rules, port=args.port)
    args.port_file.write_text(str(server.httpd.server_address[1]))
    server.httpd.serve_forever()


if __name__ == "__main__":
    main()
