"""The embedded default really loads: SmolLM2-135M from its GGUF wheel answers a question."""

from __future__ import annotations

import pytest

from sago_core.backends.factory import open_backend
from sago_core.backends.protocol import ScoringRequest
from sago_core.backends.target import model_target
from sago_core.config import RunConfig

pytestmark = pytest.mark.slow


def test_embedded_smollm2_generates_and_scores() -> None:
    backend = open_backend(model_target(RunConfig(), "hf:smollm2-135m"))
    assert backend.describe()["layers"] == "30"
    [answer] = backend.generate(["What is the capital of France?"], 16, 1)
    assert "Paris" in answer.response_text
    [scored] = backend.score(
        [ScoringRequest("What is the capital of France?", answer.response_token_ids)], 1
    )
    assert scored.hidden is not None and scored.hidden.shape[0] == 30
    assert scored.logprob is not None and -20.0 < scored.logprob < 0.0
