"""API faults over the local OpenAI-compatible server, through whole runs.

26 questions x 4 requests (base, two register variants, the noise floor's replay) = 104
requests. 22 questions carry a fault tag, one per fault kind and mode: eleven fault kinds
(429 with Retry-After, 500, 502, 503, read timeout, malformed JSON, truncated body, a 200
with an error body, empty content, a length-truncated answer, a dropped connection), each
transient (fails once, then answers) or persistent (fails every attempt); four are plain.
A twelfth kind, connect timeout, needs a port that never accepts; it is exercised on the
backend directly below.

Checks: every request ends as a success or a typed failure row, none lost or duplicated;
retries stay within the cap and wait out Retry-After; the answer cache holds only
validated answers; a rerun after the faults stop asks for the failed rows only and fills
them."""

from __future__ import annotations

import itertools
import json
import socket
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from sago_core.config import ApiSettings, RunConfig, build_config
from tests.openai_server import Rule, ScriptedServer

pytestmark = pytest.mark.slow
API_MODEL = "litellm:openai/fault-1"
RETRY_AFTER_S = 0.3
MAX_RETRIES = 2
KINDS = {  # fault -> the typed failure it must end as when it persists
    "429": "rate_limited",
    "500": "server_error",
    "502": "server_error",
    "503": "server_error",
    "hang": "timeout",
    "malformed": "malformed",
    "truncated": "malformed",
    "error_body": "error_body",
    "empty": "empty",
    "length": "length",
    "close": "connection",
}
PER_KIND_AND_MODE = 1
OK_QUESTIONS = 4


def tag(kind: str, mode: str, i: int) -> str:
    return f"zq{kind.replace('_', '')}{mode}{i}"


def questions() -> list[tuple[str, str | None, str | None]]:
    """(question, fault kind, mode) x 26."""
    out: list[tuple[str, str | None, str | None]] = []
    for kind in KINDS:
        for mode in ("transient", "persistent"):
            for i in range(PER_KIND_AND_MODE):
                out.append((f"Explain item {tag(kind, mode, i)} in one sentence?", kind, mode))
    out += [(f"Explain plain item number {i} briefly?", None, None) for i in range(OK_QUESTIONS)]
    return out


def rules() -> list[Rule]:
    script = []
    for kind in KINDS:
        for mode in ("transient", "persistent"):
            for i in range(PER_KIND_AND_MODE):
                script.append(
                    Rule(
                        kind,
                        match=tag(kind, mode, i),
                        first=1 if mode == "transient" else None,
                        retry_after=RETRY_AFTER_S,
                        delay=5.0,
                    )
                )
    return script


def _config(root: Path, base_url: str) -> RunConfig:
    data = root / "questions.jsonl"
    data.write_text("".join(json.dumps({"question": q}) + "\n" for q, _, _ in questions()))
    return build_config(
        "demo",
        {
            "models": [API_MODEL],
            "datasets": [str(data)],
            "n": len(questions()),
            "runs_dir": str(root / "runs"),
            "generation": {"max_new_tokens": 16, "batch_size": 16},
            "orchestration": {"shard_size": 10},
            "api": {
                "base_url": base_url,
                "key_env": "SAGO_FAULT_KEY",
                "concurrency": 16,
                "max_retries": MAX_RETRIES,
                "timeout_s": 2.0,
                "backoff_s": 0.01,
                "max_backoff_s": 0.05,
                "max_retry_after_s": 5.0,
            },
            "variants": {
                "register": {"strengths": [-4, 4], "positions": ["suffix"]},
                "noise": None,
                "structural": None,
            },
        },
    )


def fault_of(text: str) -> tuple[str | None, str | None]:
    for kind in KINDS:
        for mode in ("transient", "persistent"):
            if any(tag(kind, mode, i) in text for i in range(PER_KIND_AND_MODE)):
                return kind, mode
    return None, None


def test_faults_end_as_typed_rows_and_a_rerun_fills_only_the_failed_ones(
    harness: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sago.flows.evaluate import evaluate

    monkeypatch.setenv("SAGO_FAULT_KEY", "sk-fault-test")
    with ScriptedServer(rules()) as server:
        config = _config(tmp_path, server.base_url)
        run_dir = Path(evaluate(config))
        rows = pl.read_parquet(run_dir / "generations.parquet")

        # 1. every request is one row: an answer or a typed failure, never both or neither
        assert rows.height == 4 * len(questions())
        assert rows.select("prompt_id", "variant_id").n_unique() == rows.height
        answered = rows["response_text"].is_not_null()
        failed = rows["failure_reason"].is_not_null()
        assert (answered ^ failed).all()
        exact: Counter[str] = Counter()
        for text, reason, ok in zip(
            rows["prompt_text"], rows["failure_reason"], answered, strict=True
        ):
            kind, mode = fault_of(text)
            if mode == "persistent":
                # the last attempt's failure names the row; on a loaded machine that attempt
                # may itself have run out of time, which is a typed failure too
                assert not ok and reason.startswith((KINDS[kind], "timeout")), (kind, reason)
                assert f"after {MAX_RETRIES + 1} attempt(s)" in reason
                exact[kind] += reason.startswith(KINDS[kind])
            else:
                assert ok, (kind, mode, reason)
        assert set(exact) == set(KINDS) and min(exact.values()) >= 1, exact

        # 2. retries within the cap; Retry-After waited out
        with server.state.lock:
            arrivals = {k: list(v) for k, v in server.state.arrivals.items()}
            calls = dict(server.state.calls)
        repeats = rows.group_by("prompt_text").len()  # base and replay share their text
        per_text = dict(repeats.iter_rows())
        assert max(calls.values()) <= (MAX_RETRIES + 1) * max(per_text.values())
        assert sum(calls.values()) <= (MAX_RETRIES + 1) * rows.height
        # texts asked once per batch (register variants), so arrivals are one request's
        rate_limited = [t for t, n in per_text.items() if fault_of(t)[0] == "429" and n == 1]
        assert _retry_after_respected(rate_limited, arrivals)

        # 3. the cache holds exactly the validated answers
        cached = [json.loads(p.read_text()) for p in (tmp_path / "runs/.cache/api").rglob("*.json")]
        assert len(cached) == int(answered.sum())
        assert all(c["text"].strip() and c["finish_reason"] == "stop" for c in cached)

        # 4. the faults stop; a rerun asks only for the failed rows, and fills them
        server.script([])
        before = server.total_calls()
        again = Path(evaluate(config))
        assert again == run_dir
        assert server.total_calls() - before == int(failed.sum())
        filled = pl.read_parquet(run_dir / "generations.parquet")
        assert filled["failure_reason"].null_count() == filled.height
        key = ["prompt_id", "variant_id"]
        kept = rows.filter(answered).select(*key, "response_text")
        assert (
            filled.join(kept, on=key)
            .filter(pl.col("response_text") != pl.col("response_text_right"))
            .is_empty()
        )
        third = server.total_calls()
        evaluate(config)
        assert server.total_calls() == third  # everything committed: nothing asked


def _retry_after_respected(texts: list[str], arrivals: dict[str, list[float]]) -> bool:
    """Every retry of a rate-limited request came at least Retry-After after the 429."""
    from tests.openai_server import request_key

    gaps = []
    for text in texts:
        key = request_key("fault-1", [{"role": "user", "content": text}])
        gaps += [b - a for a, b in itertools.pairwise(arrivals.get(key, []))]
    return len(gaps) >= len(texts) and min(gaps) >= RETRY_AFTER_S * 0.95


def _blackhole() -> tuple[socket.socket, list[socket.socket]]:
    """A port whose accept queue is full and never drained: connects time out."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    fillers = []
    for _ in range(4):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(listener.getsockname())
        fillers.append(s)
    return listener, fillers


def test_connect_timeouts_are_typed_and_a_later_run_fills_them(tmp_path: Path) -> None:
    from sago_core.backends.api import ApiBackend
    from sago_core.backends.api_ledger import ApiLedger
    from sago_core.config import ApiSpending

    listener, fillers = _blackhole()
    port = listener.getsockname()[1]
    settings = ApiSettings(
        base_url=f"http://127.0.0.1:{port}/v1",
        concurrency=8,
        max_retries=1,
        timeout_s=0.5,
        backoff_s=0.01,
    )
    prompts = [f"Connect test question {i}?" for i in range(20)]

    def backend() -> ApiBackend:
        ledger = ApiLedger(tmp_path / "ledger.jsonl", ApiSpending())
        return ApiBackend("openai/fault-1", settings, tmp_path / "cache", ledger, "sk-test")

    try:
        first = backend().generate(prompts, 16, 16)
    finally:
        for s in fillers:
            s.close()
        listener.close()
    assert len(first) == 20
    assert all(
        g.failure_reason and g.failure_reason.split()[0] in {"timeout", "connection"} for g in first
    ), {g.failure_reason for g in first}
    assert not list((tmp_path / "cache").rglob("*.json"))  # nothing cached
    with ScriptedServer(port=port) as server:
        second = backend().generate(prompts, 16, 16)
        assert server.total_calls() == 20
    assert all(g.failure_reason is None and g.response_text for g in second)
