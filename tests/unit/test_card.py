"""The stability card: sections read from a run folder, numbers checked
against numpy/scipy on the hand-built inputs, and plain notes where a run predates the
instances, tails and axis-structure artifacts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy import stats

from sago_cli.main import main
from sago_core.report.card.build import build_card, write_card
from sago_core.scoring.summary import summarize
from sago_core.vocabulary import AXES, POOLED

DATASETS = ("d1", "d2")
N = 10
LEVELS = {"act": 0.30, "bleu": 0.01, "bert": 0.2, "prob": 0.02, "ent": 0.03, "mr": 0.0}
CONFIG = {"preset": "demo", "datasets": ["builtin"], "n": N, "seed": 0, "variants": {}}


def _values(shift: dict[str, float] | None = None, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    out = {}
    for dataset in DATASETS:
        for axis, level in LEVELS.items():
            noise = rng.normal(0, 0.01, N) if level else np.zeros(N)
            out[(dataset, axis)] = np.abs(level + noise) + (shift or {}).get(axis, 0.0)
    return out


def _run(folder: Path, model: str, values: dict, extras: bool = True) -> Path:
    folder.mkdir(parents=True)
    rows = [
        {
            "model": model,
            "dataset": d,
            "prompt_id": f"{d}-{i}",
            "axis": a,
            "s": float(v),
            "n_variants": 4,
            "missing_reason": None,
            "floor": None,
        }
        for (d, a), s in values.items()
        for i, v in enumerate(s)
    ]
    scores = pl.DataFrame(rows, schema_overrides={"floor": pl.Float64})
    scores.write_parquet(folder / "scores.parquet")
    summarize(scores).write_parquet(folder / "summary.parquet")
    prompts = scores.select("dataset", "prompt_id").unique().sort("prompt_id")
    prompts.with_columns(pl.format("q {}", pl.col("prompt_id")).alias("prompt")).write_parquet(
        folder / "prompts.parquet"
    )
    for name in ("deltas", "variants", "generations"):
        pl.DataFrame({"x": [1]}).write_parquet(folder / f"{name}.parquet")
    manifest = {
        "run_id": folder.name,
        "config": CONFIG,
        "config_hash": "abc123def4567890",
        "seed": 0,
        "written_at": "2026-12-01T08:00:00+00:00",
        "models": {model: {"identity": f"sha256:{model}", "kind": "dir", "location": "/m"}},
        "packages": {"sago": "0.1.0", "torch": "2.13.0+cpu", "polars": "2.1.0"},
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))
    (folder / "run_config.json").write_text(json.dumps(CONFIG))
    if extras:
        _extras(folder, model)
    return folder


def _extras(folder: Path, model: str) -> None:
    rng = np.random.default_rng(7)
    count = 12
    deltas = {f"d_{a}": rng.uniform(-0.5, 0.5, count) for a in AXES}
    deltas["d_mr"] = np.where(np.arange(count) % 4 == 0, 1.0, 0.0)
    frame = pl.DataFrame(
        {
            "model": [model] * count,
            "dataset": ["d1"] * count,
            "prompt_id": [f"d1-{i % 3}" for i in range(count)],
            "variant_id": [f"v{i}" for i in range(count)],
            "family": ["noise"] * count,
            "subtype": ["spacing"] * count,
            "strength": [5.0] * count,
            "position": ["global"] * count,
            "base_prompt": ["What is <b>2+2</b>?"] * count,
            "variant_prompt": ["What  is <script>x</script> 2+2?"] * count,
            "base_answer": ["4"] * count,
            "variant_answer": ["Four | maybe"] * count,
            **deltas,
            "mr_intensity": rng.uniform(0, 1, count),
        }
    ).with_columns(
        pl.when(pl.col("variant_id") == "v5").then(None).otherwise(pl.col("d_act")).alias("d_act")
    )
    frame.write_parquet(folder / "instances.parquet")
    pl.DataFrame(
        {
            "model": [model] * len(AXES),
            "dataset": [POOLED] * len(AXES),
            "axis": list(AXES),
            "family": ["__all__"] * len(AXES),
            "n": [count] * len(AXES),
            "q50": [0.1] * len(AXES),
            "q90": [0.2] * len(AXES),
            "q99": [0.3141] * len(AXES),
            "max": [0.4] * len(AXES),
            "ci_low_q99": [0.25] * len(AXES),
            "ci_high_q99": [0.35] * len(AXES),
            "share_over_0_05": [0.5] * len(AXES),
            "flip_right_to_wrong": [0.125] * len(AXES),
            "flip_wrong_to_right": [0.0] * len(AXES),
        }
    ).write_parquet(folder / "tails.parquet")
    pairs = [("act", "bleu", 0.9, True), ("act", "bert", 0.1, False), ("bleu", "bert", 0.2, False)]
    pairs += [("prob", "ent", None, False)]
    pl.DataFrame(
        {
            "model": [model] * len(pairs),
            "axis_a": [p[0] for p in pairs],
            "axis_b": [p[1] for p in pairs],
            "spearman_rho": [p[2] for p in pairs],
            "p_value": [0.001, 0.7, 0.5, None],
            "redundant": [p[3] for p in pairs],
        },
        schema_overrides={"spearman_rho": pl.Float64, "p_value": pl.Float64},
    ).write_parquet(folder / "axis_structure.parquet")


def test_card_sections_against_independent_numbers(tmp_path: Path) -> None:
    values = _values()
    run = _run(tmp_path / "rel-2", "hf:/m/rel-2", values)
    card = build_card(run)
    (model,) = card["models"]
    assert model["identity"] == "sha256:hf:/m/rel-2"
    sgs = {r["axis"]: r for r in model["pooled_sgs"]}
    for axis in AXES:
        expected = np.mean([values[(d, axis)].mean() for d in DATASETS])
        assert abs(sgs[axis]["sgs"] - expected) < 1e-12
    # act sits far above 0.05 on 20 prompts, bleu far below: scipy's one-sided tests agree
    act = np.concatenate([values[(d, "act")] for d in DATASETS])
    assert stats.ttest_1samp(act, 0.05, alternative="greater").pvalue * 18 < 0.05
    assert sgs["act"]["verdict"] == "above tolerance"
    assert sgs["bleu"]["verdict"] == "not shown above tolerance"

    instances = pl.read_parquet(run / "instances.parquet")
    matrix = instances.select([f"d_{a}" for a in AXES]).to_numpy().astype(float)
    rms = np.sqrt(np.nanmean(matrix**2, axis=1))
    expected_worst = [instances["variant_id"][int(i)] for i in np.argsort(-rms)[:3]]
    worst = model["worst_instances"]["rows"]
    assert [r["variant_id"] for r in worst] == expected_worst
    assert [r["variant_rms"] for r in worst] == [float(rms[i]) for i in np.argsort(-rms)[:3]]

    structure = model["axis_structure"]
    assert structure["redundant_pairs"] == [
        {"axis_a": "act", "axis_b": "bleu", "spearman_rho": 0.9}
    ]
    assert structure["own_signal"] == ["bert"] and structure["not_measured"] == [
        "prob",
        "ent",
        "mr",
    ]
    assert [r["axis"] for r in model["tails"]["rows"]] == list(AXES)
    assert card["paired"] is None


def test_card_files_and_the_paired_verdict_against_the_previous_release(tmp_path: Path) -> None:
    old_values = _values(seed=1)
    new_values = {k: v + (0.1 if k[1] == "act" else 0.0) for k, v in old_values.items()}
    new_values = {
        k: v + np.random.default_rng(3).normal(0, 0.002, N) if k[1] == "act" else v
        for k, v in new_values.items()
    }
    old = _run(tmp_path / "rel-1", "hf:/m/rel-1", old_values)
    new = _run(tmp_path / "rel-2", "hf:/m/rel-2", new_values)
    assert main(["card", str(new), "--against", str(old)]) == 0
    card = json.loads((new / "card.json").read_text())
    rows = {r["axis"]: r for r in card["paired"]["rows"]}
    diff = np.concatenate([new_values[(d, "act")] - old_values[(d, "act")] for d in DATASETS])
    assert abs(rows["act"]["mean_diff"] - diff.mean()) < 1e-12
    assert rows["act"]["verdict"] == "b_worse" and card["paired"]["regressions"] == ["act"]
    assert rows["bleu"]["mean_diff"] == 0.0 and rows["bleu"]["verdict"] == "equivalent"

    md = (new / "card.md").read_text()
    assert "regressions (pooled): act" in md and "0.3141" in md and "hf:/m/rel-1" in md
    assert "variant answer: “Four | maybe”" in md  # the worst instances, texts and all
    page = (new / "card.html").read_text()
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "<script" not in page and "src=" not in page and "<link" not in page  # offline


def test_a_run_without_the_instance_artifacts_says_so(tmp_path: Path) -> None:
    run = _run(tmp_path / "old", "hf:/m/old", _values(), extras=False)
    paths = write_card(run)
    assert [p.name for p in paths] == ["card.md", "card.html", "card.json"]
    md = paths[0].read_text()
    for name in ("tails.parquet", "instances.parquet", "axis_structure.parquet"):
        assert f"this run predates {name}" in md
    assert "no earlier release given" in md


def test_a_small_run_shows_why_there_is_no_interval_and_paired_means_are_labelled(
    tmp_path: Path,
) -> None:
    """Two prompts per dataset: four pooled prompts, fewer than MIN_PROMPTS; the card
    prints the reason where the band was ([x, x] from two prompts before). The paired
    block names which mean is tested and shows the dataset-weighted one beside it."""
    from sago_core.statistics.intervals import interval_refusal

    small = {k: v[:2] for k, v in _values().items()}
    old = _run(tmp_path / "rel-1", "hf:/m/rel-1", small, extras=False)
    new = _run(
        tmp_path / "rel-2",
        "hf:/m/rel-2",
        {k: v + np.array([0.01, 0.012]) for k, v in small.items()},
    )
    card = build_card(new, against=old)
    for row in card["models"][0]["pooled_sgs"]:
        assert row["ci_low"] is None and row["ci_missing_reason"] == interval_refusal(4)
    from sago_core.report.card.render import render_card_md

    text = render_card_md(card)
    sgs_line = next(line for line in text.splitlines() if line.startswith("| act |"))
    assert f"NA ({interval_refusal(4)})" in sgs_line and "[" not in sgs_line
    assert "mean diff (all prompts, tested)" in text and "dataset-weighted mean" in text
    paired = {r["axis"]: r for r in card["paired"]["rows"]}
    assert paired["act"]["mean_diff"] == pytest.approx(0.011)
    assert paired["act"]["mean_diff_datasets"] == pytest.approx(0.011)
    assert paired["act"]["ci_missing_reason"] == interval_refusal(4)


def test_the_card_shows_the_peer_indices_and_says_when_a_run_has_none(tmp_path: Path) -> None:
    from sago_core.artifacts.schemas import PEER_METRICS

    run = _run(tmp_path / "rel", "hf:/m/rel", _values())
    rows = [
        ("__all__", "__pooled__", "pss_correct", 0.3125, 4, None, None),
        ("__all__", "__pooled__", "posix", 0.0625, 4, "N-1 of the N(N-1) ordered pairs", None),
        ("__all__", "__pooled__", "pdr", None, 0, None, "NO_GOLD_ALPACA"),
        ("noise", "__pooled__", "pss_correct", 0.9, 4, None, None),  # not the card's scope
        ("__all__", "d1", "pss_correct", 0.8, 2, None, None),  # nor this
    ]
    pl.DataFrame(
        [
            {
                "model": "hf:/m/rel",
                "dataset": dataset,
                "family": family,
                "index": index,
                "value": value,
                "n": n,
                "coverage": coverage,
                "source": "a paper",
                "missing_reason": reason,
            }
            for family, dataset, index, value, n, coverage, reason in rows
        ],
        schema=PEER_METRICS,
    ).write_parquet(run / "peer_metrics.parquet")
    card = build_card(run)
    (model,) = card["models"]
    peer = model["peer_indices"]
    assert peer["available"] is True
    assert [(r["index"], r["value"]) for r in peer["rows"]] == [
        ("pss_correct", 0.3125),
        ("posix_base_column", 0.0625),  # an older run's posix: the base column
        ("pdr", None),
    ]
    md = write_card(run)[0].read_text()
    assert "## Peer indices (datasets pooled)" in md
    assert "| pss_correct | 0.3125 | 4 | a paper |  |" in md
    assert "| posix_base_column | 0.0625 | 4 | a paper | N-1 of the N(N-1) ordered pairs |" in md
    assert "| pdr | NA | 0 | a paper | NO_GOLD_ALPACA |" in md

    old = _run(tmp_path / "old", "hf:/m/old", _values(), extras=False)
    old_md = write_card(old)[0].read_text()
    assert "Peer indices" not in old_md
    assert "peer_metrics.parquet" not in old_md
    old_card = json.loads((old / "card.json").read_text())
    assert old_card["models"][0]["peer_indices"]["available"] is False
