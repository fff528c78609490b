"""The noise floor's replay: scored and generated apart from its base, MR floor exactly 0,
and the second per-layer curve (end of the user's text)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl
import pytest

from sago_core.backends.protocol import Generation, ScoringRequest, TeacherForced
from sago_core.config import AnalysisSettings, GenerationSettings, VariantGrid
from sago_core.scoring.deltas import compute_deltas
from sago_core.scoring.prompt_scores import score_prompts
from sago_core.scoring.summary import summarize
from sago_core.stages.analysis import analyse_pairs
from sago_core.stages.generation import generate_responses, generation_requests
from sago_core.stages.pairs import detect_mirroring_frame, score_pairs
from sago_core.stages.variants import build_variant_candidates
from sago_core.vocabulary import POOLED
from tests.fakes import FakeBackend

PROMPTS = pl.DataFrame(
    {
        "dataset": ["d"] * 3,
        "prompt_id": ["p1", "p2", "p3"],
        "prompt": [
            "What is the capital of France?",
            "Who wrote the play Hamlet?",
            "How many legs does a spider have?",
        ],
        "references": [["Paris"], ["Shakespeare"], ["eight"]],
        "source": ["builtin"] * 3,
    }
)
GRID = VariantGrid.model_validate(
    {
        "register": {"strengths": [-4, 4], "positions": ["prefix"]},
        "noise": {"spacing": [5], "positions": ["global"]},
    }
)


def _state(text: str, salt: float) -> np.ndarray:
    """Deterministic (layers=3, d=4) states from a prompt's text."""
    codes = np.array([ord(c) for c in text], dtype=np.float64)
    base = np.array([codes.sum(), codes[::2].sum(), codes[1::2].sum(), len(codes) + salt])
    return np.stack([base, base * [1, 2, 1, 1], base + salt]).astype(np.float32)


class RecordingBackend(FakeBackend):
    """Records every call's prompts; answers depend on the prompt; scores depend on the text."""

    def __init__(
        self, name: str = "recording", user_states: bool = True, repeats_within_call: bool = False
    ) -> None:
        super().__init__(lambda p: "Thank you! " + p[:12] if "  " in p else "Paris " + p[-6:])
        self.name = name
        self.repeats_within_call = repeats_within_call
        self.user_states = user_states
        self.generate_batches: list[list[str]] = []
        self.score_batches: list[list[str]] = []

    def generate(
        self, prompts: Sequence[str], max_new_tokens: int, batch_size: int
    ) -> list[Generation]:
        self.generate_batches.append(list(prompts))
        return super().generate(prompts, max_new_tokens, batch_size)

    def score(
        self,
        requests: Sequence[ScoringRequest],
        batch_size: int,
        max_batch_tokens: int | None = None,
    ) -> list[TeacherForced]:
        self.score_batches.append([r.prompt for r in requests])
        return [
            TeacherForced(
                _state(r.prompt, 0.0),
                -float(len(r.prompt)),
                len(r.prompt) / 100,
                len(r.response_token_ids),
                hidden_user=_state(r.prompt.strip(), 1.0) if self.user_states else None,
            )
            for r in requests
        ]


def _run(backend: RecordingBackend) -> tuple[pl.DataFrame, pl.DataFrame]:
    variants = build_variant_candidates(PROMPTS, GRID, seed=0)
    generations = generate_responses(
        backend, "fake:m", PROMPTS, variants, GenerationSettings(max_new_tokens=8, batch_size=4)
    )
    return generations, analyse_pairs(backend, generations, AnalysisSettings(batch_size=4))


def _no_base_with_its_replay(batches: list[list[str]]) -> None:
    for batch in batches:
        for prompt in PROMPTS["prompt"]:
            assert batch.count(prompt) <= 1, f"base and replay of {prompt!r} in one call"


def test_the_replay_is_generated_and_scored_in_calls_apart_from_its_base() -> None:
    backend = RecordingBackend()
    generations, analysis = _run(backend)
    assert len(backend.generate_batches) == 2 and len(backend.score_batches) == 2
    _no_base_with_its_replay(backend.generate_batches)
    _no_base_with_its_replay(backend.score_batches)
    assert backend.generate_batches[1] == PROMPTS["prompt"].to_list()  # the replays, alone
    # rows keep the order they always had, and each row got its own prompt's answer/score
    requests = generation_requests(PROMPTS, build_variant_candidates(PROMPTS, GRID, seed=0))
    order = requests.select("prompt_id", "variant_id").rows()
    assert generations.select("prompt_id", "variant_id").rows() == order
    assert analysis.select("prompt_id", "variant_id").rows() == order
    for row in generations.iter_rows(named=True):
        assert row["response_text"] == backend.answer(row["prompt_text"])
    joined = analysis.join(
        generations.select("prompt_id", "variant_id", "prompt_text"), on=["prompt_id", "variant_id"]
    )
    assert (joined["logprob"] == -joined["prompt_text"].str.len_chars().cast(pl.Float64)).all()


def test_an_api_backend_keeps_the_replay_in_the_call_of_its_base() -> None:
    """An API tells a repeat from its original only within one call (ApiBackend.request_key)."""
    backend = RecordingBackend(name="litellm", repeats_within_call=True)
    _run(backend)
    assert len(backend.generate_batches) == 1


def test_replay_mirroring_is_zero_so_the_floor_test_marks_mr() -> None:
    generations, analysis = _run(RecordingBackend())
    pairs = score_pairs(
        generations, lambda c, r: [0.5 if a != b else 1.0 for a, b in zip(c, r, strict=True)]
    )
    mirroring = detect_mirroring_frame(generations)
    replay = mirroring.filter(pl.col("variant_id").str.starts_with("replay"))
    assert replay.select("m_variant", "m_base").rows() == [(0, 0)] * 3
    assert replay["missing_reason"].null_count() == 3
    deltas = compute_deltas(generations, analysis, pairs, mirroring)
    replay_mr = deltas.filter((pl.col("family") == "replay") & (pl.col("axis") == "mr"))
    assert replay_mr["delta"].to_list() == [0.0, 0.0, 0.0]
    scores = score_prompts(deltas)
    assert scores.filter(pl.col("axis") == "mr")["floor"].to_list() == [0.0, 0.0, 0.0]
    summary = summarize(scores, test_against="floor")
    mr = summary.filter((pl.col("axis") == "mr") & (pl.col("dataset") == POOLED)).row(0, named=True)
    assert mr["floor"] == 0.0 and mr["p_floor"] is not None and mr["p_reference"] == mr["p_floor"]
    assert mr["p_holm"] is not None


def test_the_user_text_curve_is_recorded_beside_the_axis_curve() -> None:
    _, analysis = _run(RecordingBackend())
    assert analysis["layer_cosines"].null_count() == 0
    assert analysis["layer_cosines_user"].null_count() == 0
    base = analysis.filter(pl.col("variant_id") == "base")
    assert base["layer_cosines_user"].to_list() == [[1.0, 1.0, 1.0]] * 3
    assert (analysis["layer_cosines_user"].list.len() == 3).all()
    row = analysis.filter(pl.col("variant_id") != "base").row(0, named=True)
    assert row["layer_cosines_user"] != row["layer_cosines"]  # another position, other states

    _, without = _run(RecordingBackend(user_states=False))
    assert without["layer_cosines_user"].null_count() == without.height
    assert without["layer_cosines"].null_count() == 0


def test_layer_cosines_user_golden() -> None:
    """cos at the user's last token, by hand: orthogonal in layer 1, equal in layer 2."""

    class Fixed(RecordingBackend):
        def score(self, requests, batch_size, max_batch_tokens=None):  # type: ignore[no-untyped-def]
            out = []
            for r in requests:
                base = r.prompt == PROMPTS["prompt"][0]
                user = np.array([[1, 0], [2, 2]] if base else [[0, 3], [1, 1]], dtype=np.float32)
                out.append(TeacherForced(np.ones((2, 2), np.float32), -1.0, 0.1, 1, None, user))
            return out

    _, analysis = _run(Fixed())
    p1 = analysis.filter(
        (pl.col("prompt_id") == "p1") & pl.col("variant_id").str.starts_with("register")
    )
    assert p1["layer_cosines_user"].to_list()[0] == pytest.approx([0.0, 1.0])
    assert p1["layer_cosines"].to_list()[0] == [1.0, 1.0]
