"""POSIX as the paper defines it: the full N x N matrix of one instance, each
answer teacher-forced under every prompt text; its base column beside it; the cap's seeded
sample; the dry run's count; the switch off by default. Expected values are computed by hand
in the comments."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from itertools import permutations

import polars as pl
import pytest

from sago_core.backends.protocol import ScoringRequest, TeacherForced
from sago_core.config import AnalysisSettings, PosixMatrixSettings, RunConfig, build_config
from sago_core.errors import ConfigError
from sago_core.peer_metrics.full_matrix import NO_MATRIX, posix_full, scoped, with_kept
from sago_core.peer_metrics.posix import posix_full_psi, posix_psi
from sago_core.peer_metrics.sources import POSIX, POSIX_BASE_COLUMN, current_names
from sago_core.stages.posix_matrix import (
    EMPTY_ANSWER,
    kept_texts,
    matrix_sequences,
    planned_sequences,
    posix_matrix,
)

# log P(y_j | x_i): row i the prompt text, column j whose answer; text 0 is the base.
# y_0 is likelier under x_1 (-2) than under its own x_0 (-4): there the paper and the
# released package part (with every entry below both diagonals they would agree).
MATRIX = [
    [-4.0, -9.0, -6.0],
    [-2.0, -3.0, -6.0],
    [-5.0, -7.0, -2.0],
]
LENGTHS = [2, 4, 1]  # L_{y_j}


def test_the_paper_psi_by_hand() -> None:
    # column 0 (L 2): |-2+4|/2 = 1, |-5+4|/2 = .5; column 1 (L 4): |-9+3|/4 = 1.5,
    # |-7+3|/4 = 1; column 2 (L 1): |-6+2| = 4, |-6+2| = 4; 12 / (3 * 2) = 2
    assert posix_full_psi(MATRIX, LENGTHS) == pytest.approx(2.0)
    # its base column alone: (1 + .5) / 2
    assert posix_psi([-2.0, -5.0], -4.0, 2) == pytest.approx(0.75)
    # the transpose (one prompt, two answers) is another number: column 0 of M^T
    # |-9+4|/2 = 2.5, |-6+4|/2 = 1; column 1 |-2+3|/4 = .25, |-6+3|/4 = .75; column 2
    # |-5+2| = 3, |-7+2| = 5; 12.5 / 6
    transposed = [list(row) for row in zip(*MATRIX, strict=True)]
    assert posix_full_psi(transposed, LENGTHS) == pytest.approx(12.5 / 6)


def test_the_released_package_compares_two_answers_under_one_prompt() -> None:
    """The package's loop (prompt_sensitivity_index/posix.py), with its ``logprob_matrix[i]
    [k]`` = log P(y_k | x_i) and L = max_new_tokens = 1: |M[j][i] - M[j][j]|."""
    n = len(MATRIX)
    package = sum(abs(MATRIX[j][i] - MATRIX[j][j]) for i in range(n) for j in range(n)) / 6
    # entries against their row's diagonal: 5 + 2 + 1 + 3 + 3 + 5 = 19
    assert package == pytest.approx(19 / 6)
    # the paper's, against their column's diagonal: 2 + 1 + 6 + 4 + 4 + 4 = 21
    assert posix_full_psi(MATRIX, [1, 1, 1]) == pytest.approx(21 / 6)


def test_unknown_entries_and_empty_answers_drop_their_pairs() -> None:
    gaps: list[list[float | None]] = [[-4.0, None, -6.0], [-2.0, -3.0, -6.0], [-5.0, -7.0, None]]
    # column 0: 1, .5; column 1: x_0 unknown, |-7+3|/4 = 1; column 2: own unknown -> none
    assert posix_full_psi(gaps, LENGTHS) == pytest.approx(2.5 / 3)
    # y_1 empty (L 0): column 1 drops; column 0: 1, .5; column 2: 4, 4
    assert posix_full_psi(MATRIX, [2, 0, 1]) == pytest.approx(9.5 / 4)
    assert posix_full_psi([[-1.0]], [3]) is None  # one text: no pair


# --- the stage, with a backend whose log-probabilities are the matrix ----------------------

TEXTS = {"base": "What is x?", "n1": "What  is x?", "r1": "Please, what is x?"}
FAMILIES = {"base": "base", "n1": "noise", "r1": "register"}
ORDER = ["base", "n1", "r1"]


class MatrixBackend:
    """log P(answer | prompt) from MATRIX: an answer's ids are (j,) * L_{y_j}."""

    name = "matrix"

    def __init__(self) -> None:
        self.asked: list[ScoringRequest] = []

    def score(
        self,
        requests: Sequence[ScoringRequest],
        batch_size: int,
        max_batch_tokens: int | None = None,
    ) -> list[TeacherForced]:
        self.asked += requests
        out = []
        for r in requests:
            i = ORDER.index(next(v for v, t in TEXTS.items() if t == r.prompt))
            j = r.response_token_ids[0]
            out.append(TeacherForced(None, MATRIX[i][j], 0.5, len(r.response_token_ids)))
        return out


def _generations(prompt_id: str = "p1") -> pl.DataFrame:
    rows = [
        {
            "model": "mock:m",
            "dataset": "d",
            "prompt_id": prompt_id,
            "variant_id": v,
            "family": FAMILIES[v],
            "prompt_text": TEXTS[v],
            "response_token_ids": [ORDER.index(v)] * LENGTHS[ORDER.index(v)],
            "failure_reason": None,
        }
        for v in ORDER
    ]
    rows.append(  # the replay is no variant; a failed answer has no y_j
        {**rows[0], "variant_id": "replay:base:0:global", "family": "replay"},
    )
    rows.append(
        {**rows[1], "variant_id": "n2", "response_token_ids": None, "failure_reason": "x"},
    )
    return pl.DataFrame(rows, schema_overrides={"response_token_ids": pl.List(pl.Int32)})


def test_the_stage_scores_every_answer_under_every_prompt_text() -> None:
    backend = MatrixBackend()
    frame = posix_matrix(
        backend,  # type: ignore[arg-type]
        _generations(),
        PosixMatrixSettings(),
        AnalysisSettings(),
        seed=0,
    )
    assert frame.height == 9 and len(backend.asked) == 9  # N^2, replay and failure out
    assert set(frame["n_prompts"].to_list()) == {3}
    cell = frame.filter(
        (pl.col("prompt_variant_id") == "n1") & (pl.col("answer_variant_id") == "base")
    ).row(0, named=True)
    assert cell["logprob"] == -2.0 and cell["n_response_tokens"] == 2
    assert cell["prompt_family"] == "noise" and cell["answer_family"] == "base"
    # the table's measure over it: the paper's 2.0 above; the noise family's sub-matrix
    # (base, n1): |-2+4|/2 = 1, |-9+3|/4 = 1.5 -> 1.25
    value, n, reason, coverage = posix_full(scoped(frame, "mock:m", "d", "__all__"))
    assert (value, n, reason, coverage) == (pytest.approx(2.0), 1, None, None)
    assert posix_full(scoped(frame, "mock:m", "d", "noise"))[0] == pytest.approx(1.25)
    assert posix_full(None)[2] == NO_MATRIX
    # capped at 2 of its 3 texts: a family's scope still says the instance's cap, 2
    capped = with_kept(
        posix_matrix(
            MatrixBackend(),  # type: ignore[arg-type]
            _generations(),
            PosixMatrixSettings(max_prompts=2),
            AnalysisSettings(),
            seed=0,
        )
    )
    assert capped.height == 4
    for family in ("__all__", "noise", "register"):
        coverage = posix_full(scoped(capped, "mock:m", "d", family))[3]
        assert coverage is None or coverage.startswith("1 of 1 instances"), family
        assert coverage is None or "than the cap (2)" in coverage, family


def test_an_empty_answer_conditions_the_others_but_is_not_scored() -> None:
    generations = _generations().with_columns(
        pl.when(pl.col("variant_id") == "r1")
        .then(pl.lit([], dtype=pl.List(pl.Int32)))
        .otherwise(pl.col("response_token_ids"))
        .alias("response_token_ids")
    )
    backend = MatrixBackend()
    frame = posix_matrix(
        backend,  # type: ignore[arg-type]
        generations,
        PosixMatrixSettings(),
        AnalysisSettings(),
        seed=0,
    )
    assert len(backend.asked) == 6 and frame.height == 9
    empty = frame.filter(pl.col("answer_variant_id") == "r1")
    assert empty["missing_reason"].to_list() == [EMPTY_ANSWER] * 3
    # columns 0 and 1 only: 1 + .5 + 1.5 + 1 over 4 pairs
    assert posix_full(frame)[0] == pytest.approx(4.0 / 4)


# --- the cap: a seeded uniform sample of texts, every ordered pair among them --------------


def _wide(instances: int, texts: int) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "dataset": ["d"] * (instances * texts),
            "prompt_id": [f"p{k}" for k in range(instances) for _ in range(texts)],
            "variant_id": [f"v{t}" for _ in range(instances) for t in range(texts)],
            "family": ["noise"] * (instances * texts),
            "failure_reason": [None] * (instances * texts),
            "response_token_ids": [[1]] * (instances * texts),
        },
        schema_overrides={"failure_reason": pl.String},
    )


def test_the_cap_keeps_a_seeded_sample_each_text_and_pair_equally_likely() -> None:
    instances, texts, cap = 2000, 6, 3
    kept = kept_texts(_wide(instances, texts), cap, seed=0)
    sizes = kept.group_by("prompt_id").len()["len"]
    assert set(sizes.to_list()) == {cap} and set(kept["n_prompts"].to_list()) == {texts}
    # each text kept with probability cap / texts = .5; each ordered pair cap (cap - 1) /
    # (texts (texts - 1)) = 6 / 30 = .2 (sd over 2000 instances about .011 and .009)
    shares = Counter(kept["variant_id"].to_list())
    assert all(abs(shares[f"v{t}"] / instances - 0.5) < 0.05 for t in range(texts))
    ends = kept.select("prompt_id", "variant_id")
    pairs = (
        ends.join(ends, on="prompt_id", suffix="_j")
        .filter(pl.col("variant_id") != pl.col("variant_id_j"))
        .group_by("variant_id", "variant_id_j")
        .len()
    )
    assert pairs.height == len(list(permutations(range(texts), 2)))
    assert all(abs(c / instances - 0.2) < 0.04 for c in pairs["len"].to_list())
    # the same seed draws the same texts; another seed others
    again = kept_texts(_wide(instances, texts), cap, seed=0)
    assert again.equals(kept)
    other = kept_texts(_wide(instances, texts), cap, seed=1)
    assert not other.select("prompt_id", "variant_id").equals(
        kept.select("prompt_id", "variant_id")
    )


def test_a_text_left_out_does_not_change_which_others_are_kept() -> None:
    wide = _wide(50, 6)
    kept = kept_texts(wide, 3, seed=0)
    key = ["prompt_id", "variant_id"]
    # one text the cap left out, per instance, never asked at all
    left_out = wide.join(kept, on=key, how="anti").group_by("prompt_id").first()
    fewer = kept_texts(wide.join(left_out.select(key), on=key, how="anti"), 3, seed=0)
    assert set(fewer["n_prompts"].to_list()) == {5}
    assert fewer.select(key).sort(key).equals(kept.select(key).sort(key))


# --- the dry run's count and the switch ----------------------------------------------------


def test_the_dry_run_counts_min_n_cap_squared_per_instance() -> None:
    # 34 texts capped at 16: 256; 3 texts: 9; one text: no pair, nothing
    assert matrix_sequences([34, 3, 1], 16) == 265
    prompts = pl.DataFrame({"dataset": ["d", "d"], "prompt_id": ["p1", "p2"]})
    candidates = pl.DataFrame(
        {
            "dataset": ["d"] * 4,
            "prompt_id": ["p1", "p1", "p1", "p2"],
            "family": ["noise", "register", "replay", "noise"],
        }
    )
    # p1: base + 2 candidates (replay not) + 1 rewrite = 4 -> 16; p2: base + 1 = 2 -> 4
    assert planned_sequences(prompts, candidates, [1, 0], 8) == 20
    assert planned_sequences(prompts, candidates, [1, 0], 3) == 9 + 4


def test_the_switch_is_off_by_default_and_changes_no_run_id() -> None:
    off = build_config("demo")
    assert off.posix_matrix is None
    assert "posix_matrix" not in off.model_dump(mode="json")
    on = build_config("demo", {"posix_matrix": {}})
    assert on.posix_matrix == PosixMatrixSettings(max_prompts=8)
    # the matrix only adds its own artifact: the same run folder, every other stage cached
    assert on.resolved_run_id() == off.resolved_run_id()
    with pytest.raises(ConfigError, match="max_prompts"):
        build_config("demo", {"posix_matrix": {"max_prompts": 1}})
    with pytest.raises(ConfigError, match="pairs"):
        build_config("demo", {"posix_matrix": {"pairs": 3}})
    assert isinstance(RunConfig().posix_matrix, type(None))


def test_an_older_runs_posix_reads_as_the_base_column() -> None:
    old = pl.DataFrame(
        {
            "index": ["posix", "posix"],
            "coverage": ["N-1 of the N(N-1) ordered pairs per instance: ...", None],
        }
    )
    assert current_names(old)["index"].to_list() == [POSIX_BASE_COLUMN, POSIX]
