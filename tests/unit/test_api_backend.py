"""The LiteLLM backend against a real local OpenAI-compatible server: answers, the cache of
validated answers only, typed failures for every fault kind, Retry-After, budget."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from sago_core.backends.api import ApiBackend
from sago_core.backends.api_ledger import ApiLedger, BudgetExhausted
from sago_core.config import ApiSettings, ApiSpending
from tests.openai_server import Rule, ScriptedServer, answer_for

MODEL = "openai/mock-1"
PROMPTS = [f"Question number {i}: what is {i} plus {i}?" for i in range(6)]


def _backend(server: ScriptedServer, tmp: Path, **overrides: object) -> ApiBackend:
    budget = overrides.pop("budget", ApiSpending())
    settings = ApiSettings.model_validate(
        {
            "base_url": server.base_url,
            "backoff_s": 0.0,
            "timeout_s": 2.0,
            "max_retries": 2,
            **overrides,
        }
    )
    ledger = ApiLedger(tmp / "ledger.jsonl", budget)  # type: ignore[arg-type]
    return ApiBackend(MODEL, settings, tmp / "cache", ledger, api_key="sk-local-test")


def test_answers_come_back_in_order_and_a_second_pass_is_served_from_cache(
    tmp_path: Path,
) -> None:
    with ScriptedServer() as server:
        backend = _backend(server, tmp_path)
        first = backend.generate(PROMPTS, 20, 4)
        assert [g.response_text for g in first] == [answer_for(p) for p in PROMPTS]
        assert all(g.failure_reason is None and g.finish_reason == "stop" for g in first)
        assert server.total_calls() == len(PROMPTS)
        again = _backend(server, tmp_path).generate(PROMPTS, 20, 4)
        assert [g.response_text for g in again] == [g.response_text for g in first]
        assert server.total_calls() == len(PROMPTS)  # nothing sent twice
        other_length = _backend(server, tmp_path).generate(PROMPTS[:1], 30, 4)
        assert other_length[0].response_text and server.total_calls() == len(PROMPTS) + 1


FAULTS = ["429", "500", "502", "503", "malformed", "truncated", "error_body", "empty", "length"]


@pytest.mark.parametrize("fault", FAULTS)
def test_each_fault_is_retried_then_recorded_as_a_typed_failure_never_an_empty_answer(
    fault: str, tmp_path: Path
) -> None:
    with ScriptedServer([Rule(fault, retry_after=0.01)]) as server:
        backend = _backend(server, tmp_path)
        [result] = backend.generate(PROMPTS[:1], 20, 1)
        assert server.total_calls() == 3  # the first try and max_retries=2 retries
        assert result.failure_reason is not None and result.finish_reason == "failed"
        assert "after 3 attempt(s)" in result.failure_reason
        expected = {
            "429": "rate_limited",
            "500": "server_error",
            "502": "server_error",
            "503": "server_error",
            "malformed": "malformed",
            "truncated": "malformed",
            "error_body": "error_body",
            "empty": "empty",
            "length": "length",
        }[fault]
        assert result.failure_reason.startswith(expected)
        assert not list((tmp_path / "cache").rglob("*.json"))  # failures are never cached


def test_a_transient_fault_heals_on_retry_and_only_the_answer_is_cached(tmp_path: Path) -> None:
    with ScriptedServer([Rule("503", times=1), Rule("empty", times=1)]) as server:
        [result] = _backend(server, tmp_path).generate(PROMPTS[:1], 20, 1)
        assert result.failure_reason is None and result.response_text == answer_for(PROMPTS[0])
        assert server.total_calls() == 3
        entries = list((tmp_path / "cache").rglob("*.json"))
        assert len(entries) == 1 and json.loads(entries[0].read_text())["text"]


def test_retry_after_is_honoured_and_a_too_long_one_gives_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sago_core.backends.api as api

    waits: list[float] = []
    real_sleep = api.asyncio.sleep

    def recording_sleep(seconds: float, *args: Any, **kwargs: Any) -> Any:
        # asyncio is one module for the whole process: only the backend's own waits are
        # recorded (and skipped); an event loop an earlier test left running keeps its own
        if sys._getframe(1).f_globals.get("__name__") != api.__name__:
            return real_sleep(seconds, *args, **kwargs)
        waits.append(seconds)
        return real_sleep(0)

    monkeypatch.setattr(api.asyncio, "sleep", recording_sleep)
    with ScriptedServer([Rule("429", times=2, retry_after=7)]) as server:
        [ok] = _backend(server, tmp_path).generate(PROMPTS[:1], 20, 1)
        assert ok.failure_reason is None and waits == [7.0, 7.0]
    with ScriptedServer([Rule("429", retry_after=3600)]) as server:
        [gave_up] = _backend(server, tmp_path / "b").generate(PROMPTS[:1], 20, 1)
        assert server.total_calls() == 1
        assert gave_up.failure_reason is not None and "exceeds" in gave_up.failure_reason


def test_timeouts_and_dropped_connections_are_typed(tmp_path: Path) -> None:
    with ScriptedServer([Rule("hang", delay=5)]) as server:
        backend = _backend(server, tmp_path, timeout_s=0.5, max_retries=0)
        [result] = backend.generate(PROMPTS[:1], 20, 1)
        assert result.failure_reason is not None and result.failure_reason.startswith("timeout")
    with ScriptedServer([Rule("close")]) as server:
        [result] = _backend(server, tmp_path / "b", max_retries=0).generate(PROMPTS[:1], 20, 1)
        assert result.failure_reason is not None
        assert result.failure_reason.startswith(("connection", "server_error", "malformed"))


def test_budget_stops_cleanly_keeps_finished_work_and_never_counts_twice(tmp_path: Path) -> None:
    with ScriptedServer() as server:
        tight = _backend(server, tmp_path, budget=ApiSpending(max_requests=4), concurrency=1)
        with pytest.raises(BudgetExhausted, match="request budget reached"):
            tight.generate(PROMPTS, 20, 4)
        assert server.total_calls() == 4
        assert len(list((tmp_path / "cache").rglob("*.json"))) == 4  # finished work kept
        ledger = ApiLedger(tmp_path / "ledger.jsonl", ApiSpending())
        assert ledger.spent.requests == 4 and ledger.spent.tokens > 0
        roomy = _backend(server, tmp_path, budget=ApiSpending(max_requests=6))
        results = roomy.generate(PROMPTS, 20, 4)
        assert all(r.failure_reason is None for r in results)
        assert server.total_calls() == 6  # only the two unfinished prompts were sent
        assert ApiLedger(tmp_path / "ledger.jsonl", ApiSpending()).spent.requests == 6


def test_cost_is_recorded_per_call_from_configured_prices(tmp_path: Path) -> None:
    with ScriptedServer() as server:
        backend = _backend(
            server,
            tmp_path,
            prices={"input_per_million": 1000.0, "output_per_million": 2000.0},
            budget=ApiSpending(max_cost_usd=1.0),
        )
        backend.generate(PROMPTS[:2], 20, 2)
    lines = [json.loads(x) for x in (tmp_path / "ledger.jsonl").read_text().splitlines()]
    assert len(lines) == 2 and all(line["cost_usd"] > 0 for line in lines)
    assert "sk-local-test" not in (tmp_path / "ledger.jsonl").read_text()


def test_an_api_model_gives_no_teacher_forcing_and_says_why(tmp_path: Path) -> None:
    from sago_core.backends.protocol import ScoringRequest

    with ScriptedServer() as server:
        backend = _backend(server, tmp_path)
        [scored] = backend.score([ScoringRequest("q", ())], 1)
        assert scored.hidden is None and scored.logprob is None and scored.mean_entropy is None
        assert scored.missing_reason and "API" in scored.missing_reason
        assert backend.describe()["logprobs"] in ("supported", "not supported")
        assert server.total_calls() == 0


def test_a_body_cut_short_anywhere_is_malformed_not_a_server_error() -> None:
    """LiteLLM hands a 200 whose JSON does not parse on as an InternalServerError (status
    500) carrying the decoder's message; every cut of a real completion body must read as
    malformed, wherever the cut falls."""
    import json

    from sago_core.backends.api_failures import classify_exception
    from tests.openai_server import _completion

    class InternalServerError(Exception):
        status_code = 500

    body = json.dumps(_completion("openai/x", "About x: 42.", "stop", "q", "fp_a"))
    kinds = set()
    for cut in range(1, len(body)):
        try:
            json.loads(body[:cut])
        except json.JSONDecodeError as exc:
            message = f"OpenAIException - error - {exc}, Received response - <APIResponse [200 OK]>"
            kinds.add(classify_exception(InternalServerError(message)).reason)
    assert kinds == {"malformed"}
