"""The stability card at T > 0: the decoding it states, answers the
engine record marks not reproducible, the refusal of an --against run sampled differently,
and a temperature sweep's card with one row per temperature."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from sago_core.artifacts.layout import SWEEP_FILE
from sago_core.artifacts.schemas import SWEEP
from sago_core.config import build_config
from sago_core.errors import ConfigError
from sago_core.report.card.build import build_card
from sago_core.report.card.render import render_card_md
from sago_core.report.sweep.card import write_sweep_card
from sago_core.report.sweep.page import GREEDY_SHARE, ArmRun, arm_rows, sweep_table
from sago_core.sweep import sweep_record
from tests.unit.test_card import CONFIG, _run, _values

SAMPLED = {"temperature": 0.7, "top_p": 0.9, "samples": 4, "seed": 2}


def _sampled(run: Path, model: str, reproducible: list[bool]) -> Path:
    """Make ``run`` a T 0.7, K 4 run whose answers carry these reproducibility flags."""
    config = {**CONFIG, "generation": SAMPLED}
    manifest = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps({**manifest, "config": config}))
    (run / "run_config.json").write_text(json.dumps(config))
    engines = [
        json.dumps({"backend": "api", "sampling": {**SAMPLED, "reproducible": flag}})
        for flag in reproducible
    ]
    pl.DataFrame({"model": [model] * len(engines), "engine": engines}).write_parquet(
        run / "generations.parquet"
    )
    return run


def test_the_card_states_the_decoding_and_marks_answers_that_do_not_reproduce(
    tmp_path: Path,
) -> None:
    greedy = render_card_md(build_card(_run(tmp_path / "greedy", "hf:/m", _values())))
    assert "decoding: greedy (T 0, one answer per prompt text)" in greedy
    assert "not reproducible" not in greedy

    run = _sampled(_run(tmp_path / "hot", "api:gpt", _values()), "api:gpt", [False, True, False])
    card = build_card(run)
    assert card["decoding"] == {"temperature": 0.7, "top_p": 0.9, "top_k": 0, "samples": 4}
    text = render_card_md(card)
    assert "decoding: sampled at T 0.7, top_p 0.9, top_k 0 (off), K 4 answers per" in text
    assert "WARNING: 2 of 3 sampled answers are not reproducible" in text


def test_an_earlier_release_sampled_differently_is_refused_unless_allowed(
    tmp_path: Path,
) -> None:
    earlier = _run(tmp_path / "rel-1", "hf:/m/rel-1", _values(seed=1))
    release = _sampled(_run(tmp_path / "rel-2", "hf:/m/rel-2", _values()), "hf:/m/rel-2", [True])
    with pytest.raises(ConfigError, match=r"generation\.temperature 0\.0 vs 0\.7") as error:
        build_card(release, against=earlier)
    assert "--allow-different-sampling" in str(error.value)
    card = build_card(release, against=earlier, allow_different_sampling=True)
    text = render_card_md(card)
    assert "config differs (allowed): generation.samples (sampling): 1 vs 4" in text
    assert "decoding: A greedy (T 0, one answer per prompt text); B sampled at T 0.7" in text


def _summary(sgs: float) -> pl.DataFrame:
    return pl.DataFrame(
        [
            {"model": "m", "dataset": "__pooled__", "axis": axis, "sgs": sgs + i,
             "ci_low": sgs + i - 0.05, "ci_high": sgs + i + 0.05, "n": 12,
             "missing_reason": None, "ci_missing_reason": None}
            for i, axis in enumerate(("act", "bleu"))
        ]
    )  # fmt: skip


def test_a_sweeps_card_has_one_row_per_temperature(tmp_path: Path) -> None:
    sweep = tmp_path / "demo-sweep-x"
    sweep.mkdir()
    config = build_config("demo", {"generation": {"temperatures": [0, 0.7], "samples": 8}})
    (sweep / "run_config.json").write_text(json.dumps(sweep_record(config)))
    variance = pl.DataFrame(
        {"model": ["m"], "dataset": ["__pooled__"], "axis": ["act"], "share": [0.4],
         "share_ci_low": [0.2], "share_ci_high": [0.6], "missing_reason": [None],
         "ci_missing_reason": [None]}
    )  # fmt: skip
    frame = sweep_table(
        [
            arm_rows(ArmRun(0.7, 8, "demo-hot", sweep), _summary(0.1), None, variance),
            arm_rows(ArmRun(0.0, 1, "demo-greedy", sweep), _summary(0.25)),
        ]
    )
    frame.write_parquet(sweep / SWEEP_FILE)
    assert frame.schema == pl.Schema(SWEEP)
    paths = write_sweep_card(sweep)
    assert [p.name for p in paths] == ["card.md", "card.html", "card.json"]
    text = (sweep / "card.md").read_text()
    assert "| T | K | measure | act | bleu | run |" in text
    assert "| 0 | 1 | sgs | 0.2500 [0.2000, 0.3000] | 1.2500 [1.2000, 1.3000] | demo-greedy |" in (
        text
    )
    assert "| 0.7 | 8 | sgs_excess | 0.1000 [0.0500, 0.1500] | 1.1000 [1.0500, 1.1500] |" in text
    assert "| 0 | 1 | NA | NA |" in text and "| 0.7 | 8 | 0.4000 [0.2000, 0.6000] | NA |" in text
    assert f"- T 0, every axis: NA: {GREEDY_SHARE}" in text
    assert "- T 0.7, bleu: NA: variance_components.parquet holds 0 pooled rows" in text
    card = json.loads((sweep / "card.json").read_text())
    assert card["kind"] == "sweep" and card["temperatures"] == [0.0, 0.7]
    assert card["samples"] == 8
