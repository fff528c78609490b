"""Activation patching: the sampling, the measures, and the invariants of the hook on tiny
random-weight models of several families and on the embedded model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from sago_core.backends.hf import HFBackend
from sago_core.backends.mock import MockBackend
from sago_core.backends.model_source import resolve_local_model
from sago_core.backends.patching import PatchedScore, PatchRequest
from sago_core.backends.protocol import ScoringRequest
from sago_core.config import AnalysisSettings, PatchingSettings, RunConfig, build_config
from sago_core.errors import ConfigError
from sago_core.stages.analysis import analyse_pairs
from sago_core.stages.patching import (
    NO_CHANGE,
    _measure,
    _Reference,
    candidates,
    chosen_layers,
    kl_divergence,
    patch_variants,
    sample_variants,
)
from sago_core.vocabulary import NON_FINITE
from tests.families import build_family

BASE = "What is the capital of France?"
VARIANTS = ("Please, what is the capital of France? Thank you!", "what is  the capital of france")
# tiny families: plain (llama), final-logit softcap (gemma2), AltUp streams (gemma3n),
# no chat template (opt), thinking template (qwen3)
FAMILIES = ("llama", "gemma2", "gemma3n", "opt", "qwen3-thinking")


def _generations(model: str, prompts: dict[str, tuple[str, str]], answers: dict[str, list[int]]):
    """A generations frame: ``prompts`` maps variant_id -> (family, text) per prompt id p0."""
    rows = []
    for pid, ids in answers.items():
        for variant_id, (family, text) in prompts.items():
            rows.append(
                {
                    "model": model,
                    "dataset": "d",
                    "prompt_id": pid,
                    "variant_id": variant_id,
                    "family": family,
                    "subtype": "s" if family != "base" else "base",
                    "strength": 2.0 if family != "base" else 0.0,
                    "position": "global",
                    "prompt_text": text,
                    "response_token_ids": ids,
                    "failure_reason": None,
                }
            )
    return pl.DataFrame(rows, schema_overrides={"response_token_ids": pl.List(pl.Int32)})


# ------------------------------------------------------------------ no model


def test_sampling_is_stratified_seeded_and_order_free() -> None:
    rows = [
        {"dataset": "d", "prompt_id": f"p{i}", "variant_id": f"{f}:{i}", "family": f}
        for f, count in (("register", 10), ("noise", 10), ("structural", 2))
        for i in range(count)
    ]
    frame = pl.DataFrame(rows)
    sample = sample_variants(frame, 7, seed=3)
    counts = dict(sample.group_by("family").len().iter_rows())
    assert counts == {"register": 3, "noise": 2, "structural": 2} or counts == {
        "register": 2,
        "noise": 3,
        "structural": 2,
    }
    again = sample_variants(frame.reverse(), 7, seed=3)
    assert sorted(sample["variant_id"]) == sorted(again["variant_id"])
    assert sorted(sample_variants(frame, 7, seed=4)["variant_id"]) != sorted(sample["variant_id"])
    assert sample_variants(frame, 100, seed=3).height == len(rows)


def test_kl_of_log_softmax_vectors_matches_hand_values() -> None:
    p = np.log(np.array([0.5, 0.25, 0.25]))
    q = np.log(np.array([0.25, 0.5, 0.25]))
    assert kl_divergence(p, q) == pytest.approx(0.5 * np.log(2) + 0.25 * np.log(0.5))
    assert kl_divergence(p, p) == 0.0
    zero = np.array([0.0, -np.inf, -np.inf])
    assert kl_divergence(zero, q) == pytest.approx(np.log(4))  # 0 log 0 = 0
    assert kl_divergence(q, zero) is None  # q puts mass where p has none: infinite


def test_chosen_layers_and_a_layer_beyond_the_model_names_the_field() -> None:
    assert chosen_layers(PatchingSettings(), 3) == [1, 2, 3]
    assert chosen_layers(PatchingSettings(layers=(3, 1)), 3) == [1, 3]
    with pytest.raises(ConfigError, match=r"analysis\.patching\.layers.*layer 5"):
        chosen_layers(PatchingSettings(layers=(5,)), 3)
    with pytest.raises(ValueError, match="layers"):
        PatchingSettings(layers=(0,))


def test_patching_is_off_by_default_and_on_in_the_locate_preset() -> None:
    assert RunConfig().analysis.patching is None
    assert build_config("demo").analysis.patching is None
    locate = build_config("locate")
    assert locate.analysis.patching == PatchingSettings()
    # patching is its own stage: the scoring pass and the run folder do not change with it
    on = build_config("demo", {"analysis": {"patching": {"max_variants": 4}}})
    assert on.analysis.scoring_pass() == build_config("demo").analysis
    assert on.resolved_run_id() == build_config("demo").resolved_run_id()


def test_a_backend_without_layers_leaves_rows_missing_with_a_reason() -> None:
    generations = _generations(
        "mock:m",
        {"base": ("base", BASE), "v1": ("register", VARIANTS[0]), "r": ("replay", BASE)},
        {"p0": [1, 2, 3], "p1": [4, 5]},
    )
    analysis = generations.select("dataset", "prompt_id", "variant_id").with_columns(
        pl.lit(-3.0).alias("logprob")
    )
    out = patch_variants(
        MockBackend("m"), "mock:m", generations, analysis, PatchingSettings(), 0, 8
    )
    assert out.height == 2  # one row per sampled variant; the replay is never sampled
    assert set(out["family"]) == {"register"}
    assert out["layer"].null_count() == 2 and out["recovery"].null_count() == 2
    assert out["missing_reason"].str.contains("cannot patch").all()


def test_candidates_leave_out_failed_bases_and_non_finite_scores() -> None:
    generations = _generations(
        "m",
        {"base": ("base", BASE), "v1": ("register", VARIANTS[0])},
        {"p0": [1, 2], "p1": [3], "p2": [4]},
    )
    generations = generations.with_columns(
        pl.when((pl.col("prompt_id") == "p1") & (pl.col("variant_id") == "base"))
        .then(pl.lit("timeout"))
        .otherwise(pl.col("failure_reason"))
        .alias("failure_reason")
    )
    analysis = generations.select("dataset", "prompt_id", "variant_id").with_columns(
        pl.when(pl.col("prompt_id") == "p2").then(float("-inf")).otherwise(-2.0).alias("logprob")
    )
    assert candidates(generations, analysis)["prompt_id"].to_list() == ["p0"]


# ------------------------------------------------------------------ tiny models


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, HFBackend]]:
    root = tmp_path_factory.mktemp("patch-families")
    yield {
        name: HFBackend(resolve_local_model(str(build_family(name, root / name))))
        for name in FAMILIES
    }


def _first_kl(a: np.ndarray | None, b: np.ndarray | None) -> float:
    assert a is not None and b is not None
    value = kl_divergence(a, b)
    assert value is not None
    return value


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_invariants_on_tiny_models(tiny: dict[str, HFBackend], family: str) -> None:
    backend = tiny[family]
    answer = backend.generate([BASE], max_new_tokens=5, batch_size=1)[0].response_token_ids
    prompts = [BASE, *VARIANTS]
    refs = backend.patch([PatchRequest(p, answer) for p in prompts], batch_size=4)
    assert refs[0].states.shape[0] == backend.n_layers
    # the unpatched rows are the scoring pass' own numbers (the Prob axis' token ids)
    scored = backend.score([ScoringRequest(p, answer) for p in prompts], batch_size=4)
    for ref, plain in zip(refs, scored, strict=True):
        assert ref.logprob == pytest.approx(plain.logprob, abs=1e-3)
    layers = range(1, backend.n_layers + 1)
    own = [
        PatchRequest(v, answer, k, refs[i + 1].states[k - 1])
        for i, v in enumerate(VARIANTS)
        for k in layers
    ]
    with_base = [
        PatchRequest(v, answer, k, refs[0].states[k - 1]) for v in VARIANTS for k in layers
    ]
    # one padded batch of different prompts, lengths and patched layers
    out = backend.patch(own + with_base, batch_size=16)
    for i in range(len(own)):
        variant = refs[1 + i // backend.n_layers]
        assert out[i].logprob == pytest.approx(variant.logprob, abs=1e-3)  # recovery 0
        assert _first_kl(variant.first_token_logprobs, out[i].first_token_logprobs) < 1e-6
    last = [i for i, r in enumerate(with_base) if r.layer == backend.n_layers]
    for i in last:  # the base's last-layer state at the last prompt token: its distribution
        assert (
            _first_kl(refs[0].first_token_logprobs, out[len(own) + i].first_token_logprobs) < 1e-6
        )
    gap = [
        _first_kl(refs[0].first_token_logprobs, refs[j + 1].first_token_logprobs) for j in (0, 1)
    ]
    assert max(gap) > 1e-4  # the variants do move the first token: the check can fail
    # batching does not change a patched row
    alone = backend.patch([with_base[0]], batch_size=1)[0]
    assert alone.logprob == pytest.approx(out[len(own)].logprob, abs=1e-3)


# ------------------------------------------------------------------ the embedded model


@pytest.fixture(scope="module")
def embedded() -> HFBackend:
    from sago_core.backends.factory import open_backend
    from sago_core.backends.target import model_target

    backend = open_backend(model_target(RunConfig(), "hf:smollm2-135m"))
    assert isinstance(backend, HFBackend)
    return backend


@pytest.mark.slow
def test_stage_on_the_embedded_model(embedded: HFBackend) -> None:
    answer = list(embedded.generate([BASE], max_new_tokens=8, batch_size=1)[0].response_token_ids)
    generations = _generations(
        "hf:smollm2-135m",
        {"base": ("base", BASE), "v1": ("register", VARIANTS[0]), "v2": ("noise", VARIANTS[1])},
        {"p0": answer},
    )
    analysis = analyse_pairs(embedded, generations, AnalysisSettings())
    n = embedded.n_layers
    settings = PatchingSettings(layers=(1, n // 2, n))
    out = patch_variants(embedded, "hf:smollm2-135m", generations, analysis, settings, 0, 8)
    assert out.height == 2 * 3 and out["missing_reason"].null_count() == out.height
    prob = analysis.select("variant_id", "logprob")
    joined = out.join(prob, on="variant_id")
    # recovery is taken on the Prob axis' numbers: the same token ids, the same pass
    np.testing.assert_allclose(joined["logprob_variant"], joined["logprob"], atol=1e-3)
    base_logprob = analysis.filter(pl.col("variant_id") == "base")["logprob"].item()
    np.testing.assert_allclose(out["logprob_base"], base_logprob, atol=1e-3)
    expected = (out["logprob_patched"] - out["logprob_variant"]) / (
        out["logprob_base"] - out["logprob_variant"]
    )
    np.testing.assert_allclose(out["recovery"], expected)
    last = out.filter(pl.col("layer") == n)
    assert last["kl_first_token"].max() < 1e-6  # the base's last state: its first token
    assert (last["kl_variant"] > 1e-4).all()


@pytest.mark.slow
def test_invariants_on_the_embedded_model(embedded: HFBackend) -> None:
    answer = embedded.generate([BASE], max_new_tokens=6, batch_size=1)[0].response_token_ids
    base, variant = embedded.patch(
        [PatchRequest(BASE, answer), PatchRequest(VARIANTS[0], answer)], 2
    )
    n = embedded.n_layers
    rows = [
        PatchRequest(VARIANTS[0], answer, 1, variant.states[0]),
        PatchRequest(VARIANTS[0], answer, n // 2, variant.states[n // 2 - 1]),
        PatchRequest(VARIANTS[0], answer, n, base.states[n - 1]),
    ]
    own_1, own_mid, last = embedded.patch(rows, batch_size=3)
    assert own_1.logprob == pytest.approx(variant.logprob, abs=1e-3)
    assert own_mid.logprob == pytest.approx(variant.logprob, abs=1e-3)
    assert _first_kl(base.first_token_logprobs, last.first_token_logprobs) < 1e-6
    assert _first_kl(base.first_token_logprobs, variant.first_token_logprobs) > 1e-4


def test_recovery_by_hand_and_undefined_without_a_change() -> None:
    first = np.log(np.array([0.5, 0.5]))
    moved = np.log(np.array([0.75, 0.25]))
    states = np.zeros((2, 4), np.float32)
    ref = _Reference(PatchedScore(-2.0, first, states), PatchedScore(-6.0, moved, states))
    recovery, kl, reason = _measure(ref, PatchedScore(-5.0, first, states))
    assert recovery == pytest.approx(0.25) and kl == pytest.approx(0.0) and reason is None
    flat = _Reference(PatchedScore(-2.0, first, states), PatchedScore(-2.0 + 1e-6, moved, states))
    recovery, kl, reason = _measure(flat, PatchedScore(-3.0, moved, states))
    assert recovery is None and reason == NO_CHANGE
    # the guard is relative: 2e-4 nats of a 5-nat answer is no change (the old absolute
    # 1e-4 guard let it through, with a recovery of 100 from a 0.02-nat patch) ...
    tiny = _Reference(PatchedScore(-5.0, first, states), PatchedScore(-5.0002, moved, states))
    assert _measure(tiny, PatchedScore(-4.9802, first, states))[0] is None
    # ... while 0.06 nats (1.2% of it) is one
    small = _Reference(PatchedScore(-5.0, first, states), PatchedScore(-5.06, moved, states))
    assert _measure(small, PatchedScore(-5.03, first, states))[0] == pytest.approx(0.5)
    assert kl == pytest.approx(0.5 * np.log(0.5 / 0.75) + 0.5 * np.log(0.5 / 0.25))
    broken = _Reference(
        PatchedScore(-2.0, first, states), PatchedScore(float("-inf"), moved, states)
    )
    assert _measure(broken, PatchedScore(-3.0, first, states))[2] == NON_FINITE


@pytest.mark.slow
def test_dry_run_plan_counts_patched_forwards(tiny_model_dir: Path, tmp_path: Path) -> None:
    from sago_core.artifacts.layout import RunLayout
    from sago_core.backends.target import run_targets
    from sago_core.run_plan import plan_run, render_plan
    from sago_core.stages.prompts import prepare_prompts

    def plan(patching: dict[str, object]) -> tuple[int, int | None, int | None]:
        config = build_config(
            "demo",
            {
                "models": [f"hf:{tiny_model_dir}"],
                "n": 1,
                "runs_dir": str(tmp_path),
                "variants": {"structural": None},
                "analysis": {"patching": patching},
            },
        )
        layout = RunLayout.of(config.runs_dir, config.resolved_run_id())
        made = plan_run(config, prepare_prompts(config), run_targets(config), layout, {})
        assert "patched forwards" in render_plan(made, config)
        cost = made.patching[f"hf:{tiny_model_dir}"]
        return cost.variants, cost.layers, cost.forwards

    # the tiny Llama declares 3 layers in its config.json
    assert plan({"max_variants": 5}) == (5, 3, 15)
    assert plan({"max_variants": 5, "layers": [2]}) == (5, 1, 5)
    variants, _, forwards = plan({"max_variants": 10_000})  # capped by the grid's variants
    assert variants < 10_000 and forwards == 3 * variants
