"""API drift: an API model that changes under the same name mid-run is flagged.

The local OpenAI-compatible server answers with a ``system_fingerprint`` and a served model
name, and switches them after half the answers (a provider updating the model behind its
alias). Every answer's row records what the provider said (``engine`` JSON: served_model,
system_fingerprint), cached answers included; ``identities_of`` lists them per model, and a
run whose answers for one model span two identities says so in summary.md and report.html.
A run against a server that never drifts says nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from sago_core.backends.api import ApiBackend
from sago_core.backends.api_ledger import ApiLedger
from sago_core.backends.api_served import describe_drift, drifted, identities_of
from sago_core.config import ApiSettings, RunConfig, build_config
from tests.openai_server import ScriptedServer

API_MODEL = "litellm:openai/drift-1"
QUESTIONS = [f"Explain drifting item number {i} briefly?" for i in range(4)]
REQUESTS = 4 * len(QUESTIONS)  # base, two register variants, the noise floor's replay
DRIFTS = (("fingerprint", "fp_sago_b", None), ("served model", "fp_sago_b", "drift-1-0613"))


def _config(root: Path, base_url: str) -> RunConfig:
    root.mkdir(parents=True, exist_ok=True)
    data = root / "questions.jsonl"
    data.write_text("".join(json.dumps({"question": q}) + "\n" for q in QUESTIONS))
    return build_config(
        "demo",
        {
            "models": [API_MODEL],
            "datasets": [str(data)],
            "n": len(QUESTIONS),
            "runs_dir": str(root / "runs"),
            "generation": {"max_new_tokens": 16, "batch_size": 16},
            # every variant kept: the requests are exactly REQUESTS
            "bertscore": {"model": "minilm-l6", "num_layers": 6, "semantic_threshold": 0.01},
            "api": {"base_url": base_url, "key_env": "SAGO_DRIFT_KEY", "concurrency": 1},
            "variants": {
                "register": {"strengths": [-4, 4], "positions": ["suffix"]},
                "noise": None,
                "structural": None,
            },
        },
    )


def _generations(engines: list[str], texts: list[str | None]) -> pl.DataFrame:
    return pl.DataFrame(
        {"model": "m", "response_text": texts, "engine": engines},
        schema={"model": pl.String, "response_text": pl.String, "engine": pl.String},
    )


def test_identities_are_read_from_each_answer_and_failures_are_left_out() -> None:
    a = json.dumps({"backend": "litellm", "system_fingerprint": "fp_a", "served_model": "x"})
    b = json.dumps({"backend": "litellm", "system_fingerprint": "fp_b", "served_model": "x"})
    local = json.dumps({"backend": "hf"})
    frame = _generations([a, a, b, b, local], ["t", "t", "t", None, "t"])
    found = identities_of(frame)
    assert found.select("system_fingerprint", "answers").rows() == [("fp_a", 2), ("fp_b", 1)]
    assert found["served_model"].to_list() == ["x", "x"]
    assert found["served_headers"].null_count() == 2
    assert list(drifted(frame)) == ["m"]
    assert describe_drift(drifted(frame)) == [
        "m: answered by 2 identities: served_model x, system_fingerprint fp_a (2 answers); "
        "served_model x, system_fingerprint fp_b (1 answers)"
    ]
    assert drifted(_generations([a, a, local], ["t", "t", "t"])) == {}
    # a fingerprint sent on some answers only is not a second model
    bare = json.dumps({"backend": "litellm", "served_model": "x"})
    assert drifted(_generations([a, bare, bare], ["t", "t", "t"])) == {}
    renamed = json.dumps({"backend": "litellm", "served_model": "y"})
    assert list(drifted(_generations([a, renamed], ["t", "t"]))) == ["m"]


def test_a_cached_answer_keeps_the_identity_that_gave_it(tmp_path: Path) -> None:
    with ScriptedServer() as server:
        settings = ApiSettings(base_url=server.base_url, key_env=None, concurrency=1)
        ledger = ApiLedger(tmp_path / "ledger.jsonl", settings.spending)
        backend = ApiBackend("openai/drift-1", settings, tmp_path / "cache", ledger, "sk-x")
        server.drift(after=1, fingerprint="fp_sago_b", model="drift-1-0613")
        asked = backend.generate(QUESTIONS[:2], 8, 2)
        again = backend.generate(QUESTIONS[:2], 8, 2)
        assert server.total_calls() == 2
    assert (
        [g.served for g in asked]
        == [g.served for g in again]
        == [
            {"served_model": "drift-1", "system_fingerprint": "fp_sago_a"},
            {"served_model": "drift-1-0613", "system_fingerprint": "fp_sago_b"},
        ]
    )


@pytest.mark.slow
def test_a_model_changing_under_its_name_mid_run_is_flagged(
    harness: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sago.flows.evaluate import evaluate

    monkeypatch.setenv("SAGO_DRIFT_KEY", "sk-drift-test")
    flagged = 0
    for name, fingerprint, model in (("steady", None, None), *DRIFTS):
        with ScriptedServer() as server:
            if fingerprint is not None:
                server.drift(after=REQUESTS // 2, fingerprint=fingerprint, model=model)
            run_dir = Path(evaluate(_config(tmp_path / name, server.base_url)))
        generations = pl.read_parquet(run_dir / "generations.parquet")
        assert generations["failure_reason"].null_count() == REQUESTS
        found = identities_of(generations)
        summary = (run_dir / "summary.md").read_text()
        report = (run_dir / "report.html").read_text()
        if fingerprint is None:
            assert found.height == 1 and found["system_fingerprint"][0] == "fp_sago_a"
            assert "identity drift" not in summary and "identity drift" not in report
            continue
        assert found["answers"].to_list() == [REQUESTS // 2, REQUESTS // 2], found
        assert found["system_fingerprint"].to_list() == ["fp_sago_a", fingerprint]
        assert found["served_model"].to_list() == ["drift-1", model or "drift-1"]
        assert "**Model identity drift**" in summary and API_MODEL in summary
        assert "Model identity drift" in report and "fp_sago_b" in report
        flagged += 1
    assert flagged == len(DRIFTS)
    print(f"drift events flagged: {flagged} / {len(DRIFTS)}")
