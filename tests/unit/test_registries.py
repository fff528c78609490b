"""A toy backend and a toy axis enter through the registries alone (one declaration each,
below) and flow through: the config accepts the backend's name, the factory builds it, the
plan lists it; the axis is a column of instances.parquet, a delta of compute_deltas, a bench
tolerance and a word of the vocabulary. Registration is undone after each test."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest
from pydantic import ValidationError

from sago_core.backends.mock import MockBackend
from sago_core.backends.protocol import ScoringRequest, TeacherForced
from sago_core.config import AnalysisSettings, GenerationSettings, RunConfig, VariantGrid
from sago_core.registry import axes as axis_registry
from sago_core.registry import backends as backend_registry
from sago_core.registry.axes import AxisSpec
from sago_core.registry.backends import BackendSpec
from tests.fakes import PROMPTS
from tests.grids import noise_only

GRID = VariantGrid.model_validate(noise_only())
BUILTIN_AXES = ("act", "bleu", "bert", "prob", "ent", "mr")


class ToyBackend(MockBackend):
    """The mock's answers and log-probabilities, without hidden states (as declared)."""

    name = "toy"

    def score(
        self,
        requests: Sequence[ScoringRequest],
        batch_size: int,
        max_batch_tokens: int | None = None,
    ) -> list[TeacherForced]:
        scored = super().score(requests, batch_size, max_batch_tokens)
        return [replace(t, hidden=None) for t in scored]


def _toy_rule() -> tuple[pl.Expr, pl.Expr]:
    # The toy axis: the Prob delta plus the Ent delta (raw, before scaling).
    value = (pl.col("logprob") - pl.col("logprob_base")) + (
        pl.col("mean_entropy") - pl.col("ent_base")
    )
    return value, pl.lit("toy not measured")


# The two declarations: nothing else in sago is edited for them.
TOY_BACKEND = BackendSpec(
    "toy",
    lambda target, places, api_key, device: ToyBackend(target.model_id),
    "none",
    frozenset({"logprobs"}),  # log-probabilities and entropies, no hidden states, no patching
    summary="a test backend",
)
TOY_AXIS = AxisSpec("toy", 4.0, _toy_rule, 0.5, frozenset({"logprobs"}), "a test axis")


@pytest.fixture
def toy() -> Iterator[None]:
    with backend_registry.registered(TOY_BACKEND), axis_registry.registered(TOY_AXIS):
        yield
    assert "toy" not in backend_registry.backend_names()
    assert "toy" not in axis_registry.axis_names()


def test_the_config_accepts_a_backend_once_it_is_registered() -> None:
    with pytest.raises(ValidationError, match="'toy:m': unknown backend 'toy'"):
        RunConfig(models=("toy:m",))
    with backend_registry.registered(TOY_BACKEND):
        assert RunConfig(models=("toy:m",)).models == ("toy:m",)
    with pytest.raises(ValidationError, match="toy"):
        RunConfig(models=("toy:m",))


def test_the_factory_builds_the_registered_backend(toy: None) -> None:
    from sago_core.backends.factory import open_backend
    from sago_core.backends.target import model_target

    config = RunConfig(models=("toy:m",))
    target = model_target(config, "toy:m")
    assert (target.backend, target.identity, target.source) == ("toy", "toy:m", None)
    assert not target.is_api and target.declared is TOY_BACKEND
    backend = open_backend(target)
    assert isinstance(backend, ToyBackend) and backend.model_id == "m"
    assert open_backend(target) is backend  # one engine per target, as for every backend


def test_the_plan_lists_the_toy_model_and_what_it_can_measure(toy: None, tmp_path: Path) -> None:
    from sago_core.artifacts.layout import RunLayout
    from sago_core.backends.target import run_targets
    from sago_core.run_plan import plan_run, render_plan

    config = RunConfig(
        models=("toy:m", "mock:m"),
        runs_dir=tmp_path,
        variants=GRID,
        analysis=AnalysisSettings(patching={"layers": [1]}),
    )
    layout = RunLayout.of(config.runs_dir, config.resolved_run_id())
    plan = plan_run(config, PROMPTS, run_targets(config), layout, {})
    # 2 prompts x (base + 2 noise variants + replay) = 8 texts per model
    assert plan.generations == plan.teacher_forced == {"toy:m": 8, "mock:m": 8}
    assert plan.axes == {
        "toy:m": ("bleu", "bert", "prob", "ent", "mr", "toy"),  # no hidden states: no act
        "mock:m": ("act", "bleu", "bert", "prob", "ent", "mr", "toy"),
    }
    assert plan.patching == {} and plan.api == []  # neither can patch nor is an API
    assert "toy:m: 8 generations" in render_plan(plan, config)


def _stage_inputs(
    model: str,
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """generations, analysis, pairs, mirroring of ``model`` through the real stages."""
    from sago_core.backends.factory import open_backend
    from sago_core.backends.target import model_target
    from sago_core.stages.analysis import analyse_pairs
    from sago_core.stages.generation import generate_responses
    from sago_core.stages.pairs import detect_mirroring_frame, score_pairs
    from sago_core.stages.variants import build_variant_candidates

    backend = open_backend(model_target(RunConfig(models=(model,)), model))
    variants = build_variant_candidates(PROMPTS, GRID, seed=0)
    settings = GenerationSettings(max_new_tokens=6, batch_size=4)
    generations = generate_responses(backend, model, PROMPTS, variants, settings)
    analysis = analyse_pairs(backend, generations, AnalysisSettings(batch_size=4))
    pairs = score_pairs(generations, lambda cands, refs: [0.5] * len(cands))
    return generations, analysis, pairs, detect_mirroring_frame(generations)


def test_the_toy_axis_is_a_column_a_delta_and_a_tolerance(toy: None) -> None:
    from bench.pipelines import tolerances
    from sago_core.artifacts.schemas import instances_schema
    from sago_core.scoring.deltas import compute_deltas
    from sago_core.stages.instances import build_instances
    from sago_core.vocabulary import AXES, SCALES

    assert tuple(AXES) == (*BUILTIN_AXES, "toy") and SCALES["toy"] == 4.0
    assert tolerances()["toy"] == 0.5
    schema = instances_schema()
    assert schema["d_toy"] == pl.Float64 and schema["reason_toy"] == pl.String

    generations, analysis, pairs, mirroring = _stage_inputs("toy:m")
    deltas = compute_deltas(generations, analysis, pairs, mirroring)
    assert set(deltas["axis"]) == {*BUILTIN_AXES, "toy"}
    # By hand, from the analysis rows: (logprob + entropy) of the variant minus the base's.
    rows = {(r["prompt_id"], r["variant_id"]): r for r in analysis.iter_rows(named=True)}
    toy_rows = deltas.filter(pl.col("axis") == "toy").iter_rows(named=True)
    expected_count = 0
    for row in toy_rows:
        variant, base = (
            rows[(row["prompt_id"], row["variant_id"])],
            rows[(row["prompt_id"], "base")],
        )
        expected = (variant["logprob"] - base["logprob"]) + (
            variant["mean_entropy"] - base["mean_entropy"]
        )
        assert row["delta"] == pytest.approx(expected, abs=1e-12)
        assert row["delta_norm"] == pytest.approx(expected / 4.0, abs=1e-12)
        expected_count += 1
    assert expected_count == 6  # 2 prompts x (2 noise variants + replay)
    # The toy backend measures no hidden states: Act is missing with the backend's reason.
    act = deltas.filter(pl.col("axis") == "act")
    assert act["delta"].null_count() == len(act) and act["missing_reason"].null_count() == 0

    instances = build_instances(deltas, generations, PROMPTS)
    assert instances.schema == pl.Schema(schema)
    toy_norms = deltas.filter((pl.col("axis") == "toy") & (pl.col("family") != "replay"))
    joined = instances.join(toy_norms, on=["prompt_id", "variant_id"])
    assert len(joined) == 4 and joined["d_toy"].to_list() == joined["delta_norm"].to_list()


def test_registrations_are_undone_and_names_are_unique() -> None:
    assert tuple(axis_registry.axis_names()) == BUILTIN_AXES
    # built in first; an installed plug-in's (the test environment's echo) may follow
    assert backend_registry.backend_names()[:4] == ("hf", "vllm", "litellm", "mock")
    for registry, spec in (
        (backend_registry, BackendSpec("mock", "x:y", "none")),
        (axis_registry, AxisSpec("act", 1.0, "x:y", 0.0)),
    ):
        with pytest.raises(ValueError, match="already registered"), registry.registered(spec):
            pass
    from sago_core.artifacts.schemas import instances_schema

    assert "d_toy" not in instances_schema()
