"""The vLLM engine starts before the transformers scorer loads: vLLM sizes its
GPU memory from ``gpu_memory_utilization`` of what is free when it starts, so a scorer
loaded first (the context-window check before the first shard) would leave it less than it
is told to take. Against the scripted worker of ``test_vllm_backend.py`` (no vLLM)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from sago_core.backends.protocol import ScoringRequest, TeacherForced
from sago_core.stages.generation import check_fit
from tests.flow.test_vllm_backend import ScriptedScorer, scripted_backend


class CountingScorer(ScriptedScorer):
    """The scripted scorer with the rest of what the vLLM backend asks of its scorer."""

    def prompt_lengths(self, prompts: Sequence[str]) -> list[int]:
        return [len(self.render_prompt_ids(p)) for p in prompts]

    def context_window(self) -> int:
        return 64

    def score(
        self, requests: Sequence[ScoringRequest], batch_size: int, max_batch_tokens: int | None
    ) -> list[TeacherForced]:
        return []


def recording_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, list[bool]]:
    """A scripted vLLM backend whose scorer, when it loads, records whether the engine had
    already answered ready."""
    backend, _ = scripted_backend(tmp_path, monkeypatch)
    backend._scorer = None
    loads: list[bool] = []

    def load() -> CountingScorer:
        if backend._scorer is None:
            loads.append(bool(backend.engine.get("ready")))
            backend._scorer = CountingScorer()
        return backend._scorer

    backend.scorer = load
    return backend, loads


def test_the_engine_starts_before_the_scorer_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend, loads = recording_backend(tmp_path, monkeypatch)
    try:
        # What the first shard does: the prompts' fit (context window), then generation.
        fit = check_fit(backend, ["one three", "a bb"], 5)
        answers = backend.generate(["one three", "a bb"], 5, 4)
    finally:
        backend.close()
    assert fit.window == 64 and fit.over == (None, None)
    assert loads == [True], "the scorer loaded once, after the engine was ready"
    assert [a.response_token_ids for a in answers] == [(3, 5, 7), (1, 2, 7)]


def test_scoring_alone_never_starts_the_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend, loads = recording_backend(tmp_path, monkeypatch)
    try:
        backend.score([ScoringRequest("x", (1, 2))], 4)
        assert backend._process is None
    finally:
        backend.close()
    assert loads == [False]
