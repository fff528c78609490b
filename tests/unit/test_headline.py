"""The report's headline block: per model the unstable axes at each eps
(Holm over every summary row, by hand below), the worst family/subtype and instance, the flip
rates, the verdicts against the previous release or why there are none. That the block
opens the rendered page is checked in Chromium (test_report_browser.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
import pytest

from sago_core.report.page.headline import (
    NO_COMPARISON,
    flip_rates,
    glances,
    headline_html,
    unstable_axes,
    weak_rewriter_note,
    worst_instance,
    worst_subtype,
)
from sago_core.report.page.html import paired_from_card

P = "__pooled__"


def _summary() -> pl.DataFrame:
    """Five rows with p-values chosen so Holm decides: ent's raw p 0.045 at eps 0.01 is
    not significant after Holm over the four p-values of that column (m = 4)."""
    rows = [
        # dataset, axis, sgs, p01, p05, p10
        (P, "act", 0.2, 0.001, 0.004, 0.2),
        (P, "bleu", 0.05, 0.01, 0.3, 0.9),
        (P, "prob", None, None, None, None),
        ("d1", "act", 0.3, 0.03, 0.5, 0.9),
        (P, "ent", 0.02, 0.045, 0.5, 0.9),
    ]
    return pl.DataFrame(
        [
            {
                "model": "m",
                "dataset": d,
                "axis": a,
                "sgs": s,
                "p_eps_0_01": p1,
                "p_eps_0_05": p5,
                "p_eps_0_10": p10,
                "reference": "eps 0.05",
                "p_holm": None,
            }
            for d, a, s, p1, p5, p10 in rows
        ],
        schema_overrides={
            "sgs": pl.Float64,
            "p_eps_0_01": pl.Float64,
            "p_eps_0_05": pl.Float64,
            "p_eps_0_10": pl.Float64,
            "p_holm": pl.Float64,
        },
    )


def test_unstable_axes_read_holm_over_every_row_at_each_eps() -> None:
    unstable, stable, unmeasured = unstable_axes(_summary(), "m")
    # eps 0.01, sorted p: 0.001 x4 = 0.004 (act), 0.01 x3 = 0.03 (bleu), 0.03 x2 = 0.06 (d1),
    # 0.045 x1 -> 0.06 (monotone): act and bleu significant, ent not.
    # eps 0.05: 0.004 x4 = 0.016 (act); 0.3 x3 = 0.9. eps 0.10: 0.2 x4 = 0.8: none.
    found = {u.axis: (u.eps, u.p_holm) for u in unstable}
    assert found == {"act": (0.05, pytest.approx(0.016)), "bleu": (0.01, pytest.approx(0.03))}
    assert stable == ["ent"] and unmeasured == ["prob"]
    text = headline_html(glances(_summary(), _deltas()))
    assert "<b>act</b> &gt; 0.05*" in text and "<b>bleu</b> &gt; 0.01*" in text
    assert "no eps exceeded: ent" in text and "not measured: prob" in text


def _deltas() -> pl.DataFrame:
    rows = [
        # variant, family, subtype, axis, delta_norm
        ("v1", "register", "politer", "act", 0.3),
        ("v1", "register", "politer", "bleu", -0.4),
        ("v2", "register", "politer", "act", 0.1),
        ("v2", "register", "politer", "bleu", None),
        ("v3", "noise", "spacing", "act", 0.2),
        ("v3", "noise", "spacing", "bleu", 0.2),
        ("r", "replay", "base", "act", 9.0),  # the replay is no family to blame
    ]
    return pl.DataFrame(
        [
            {
                "model": "m",
                "dataset": "d1",
                "prompt_id": "p1",
                "variant_id": v,
                "family": f,
                "subtype": s,
                "axis": a,
                "delta_norm": d,
            }
            for v, f, s, a, d in rows
        ],
        schema_overrides={"delta_norm": pl.Float64},
    )


def test_the_worst_subtype_is_the_highest_mean_variant_rms() -> None:
    worst = worst_subtype(_deltas(), "m")
    v1 = math.sqrt((0.3**2 + 0.4**2) / 2)  # 0.3536; v2: 0.1 (bleu missing); v3: 0.2
    assert worst is not None and worst.label == "register/politer" and worst.n == 2
    assert worst.rms == pytest.approx((v1 + 0.1) / 2)
    assert (worst.axis, worst.axis_value) == ("bleu", pytest.approx(0.4))  # act: 0.2


def test_the_worst_instance_flips_and_missing_parts_are_said() -> None:
    instances = pl.DataFrame(
        {
            "model": ["m", "m", "other"],
            "dataset": ["d1", "d2", "d1"],
            "prompt_id": ["p1", "p7", "p1"],
            "family": ["noise", "register", "noise"],
            "subtype": ["spacing", "ruder", "spacing"],
            "strength": [5.0, -2.0, 5.0],
            "position": ["global", "suffix", "global"],
            "variant_prompt": ["a", "Answer now, " + "x" * 300, "b"],
            "d_act": [0.5, 0.4, 9.0],
            "d_bleu": [0.0, -0.6, None],
        }
    )
    worst = worst_instance(instances, "m")  # RMS 0.3536 vs sqrt((0.16 + 0.36) / 2) = 0.5099
    assert worst is not None and worst.label == "d2/p7"
    assert worst.rms == pytest.approx(math.sqrt(0.26)) and worst.axis == "bleu"
    tails = pl.DataFrame(
        {
            "model": ["m", "m", "m", "n"],
            "dataset": [P, P, "d1", P],
            "family": ["__all__", "__all__", "__all__", "__all__"],
            "axis": ["act", "bleu", "act", "act"],
            "flip_right_to_wrong": [0.25, 0.25, 0.9, None],
            "flip_wrong_to_right": [0.125, 0.125, 0.9, None],
            "ci_low_flip_right_to_wrong": [0.1, 0.1, 0.0, None],
            "ci_high_flip_right_to_wrong": [0.4, 0.4, 1.0, None],
            "n_judged": [16, 16, 8, 0],
            "flip_missing_reason": [None, None, None, "no reference answers"],
        }
    )
    row, note = flip_rates(tails, "m")
    assert row is not None and row["flip_right_to_wrong"] == 0.25 and note is None
    assert flip_rates(tails, "n") == (None, "no reference answers")
    summary = pl.concat([_summary(), _summary().with_columns(pl.lit("n").alias("model"))])
    text = headline_html(glances(summary, _deltas(), instances, tails))
    m_block, n_block = text.split("<h3>")[1:]
    assert "right→wrong <b>0.250 [0.100, 0.400]</b>, wrong→right 0.125 of 16" in m_block
    assert "<b>d2/p7</b> (register/ruder, strength -2, suffix)" in m_block
    assert "Answer now, " + "x" * 100 in m_block and "x" * 200 not in m_block  # cut short
    assert "no reference answers" in n_block and "no variant with a measured delta" in n_block
    bare = headline_html(glances(_summary(), _deltas()))
    assert "no instances.parquet in this run" in bare and "no tails.parquet in this run" in bare
    assert NO_COMPARISON in bare  # the report knows of no earlier release: it says so


def test_verdicts_against_the_previous_release_come_from_the_card(tmp_path: Path) -> None:
    paired = {
        "against": "runs/old",
        "margin": 0.02,
        "rows": [
            {"axis": "bleu", "model_a": "old", "model_b": "m", "verdict": "b_worse"},
            {"axis": "act", "model_a": "old", "model_b": "m", "verdict": "b_worse"},
            {"axis": "prob", "model_a": "old", "model_b": "m", "verdict": "equivalent"},
            {"axis": "ent", "model_a": "old", "model_b": "m", "verdict": None},
            {"axis": "act", "model_a": "old", "model_b": "zz", "verdict": "b_better"},
        ],
    }
    (tmp_path / "card.json").write_text(json.dumps({"paired": paired, "paired_note": None}))
    known = paired_from_card(tmp_path)
    text = headline_html(glances(_summary(), _deltas(), **known))
    assert "against old (<code>runs/old</code>, margin 0.02)" in text
    assert "<b>less stable</b> on act, bleu; equivalent on prob; no verdict on ent" in text
    assert "more stable" not in text  # zz's row is another model's
    assert paired_from_card(tmp_path / "none") == {}
    note = "first release of family f evaluated by this watch"
    assert note in headline_html(glances(_summary(), _deltas(), paired_note=note))


def test_the_embedded_rewriter_is_named_a_weak_rewriter_with_its_counts() -> None:
    variants = pl.DataFrame(
        {
            "family": ["structural"] * 5 + ["noise"],
            "kept": [True, False, False, True, False, True],
        }
    )
    embedded = {"config": {"variants": {"structural": {"rewriter": "hf:smollm2-135m"}}}}
    note = weak_rewriter_note(embedded, variants)
    assert note is not None
    assert note.startswith("Structural variants by the embedded hf:smollm2-135m: a weak rewriter")
    assert "(2 kept of 5 asked;" in note
    assert f"<b>{note}</b>" in headline_html(glances(_summary(), _deltas()), None, note)
    api = {"config": {"variants": {"structural": {"rewriter": "litellm:openai/gpt-4o"}}}}
    assert weak_rewriter_note(api, variants) is None
    assert weak_rewriter_note({"config": {"variants": {"structural": None}}}, variants) is None
    assert weak_rewriter_note(None, variants) is None
