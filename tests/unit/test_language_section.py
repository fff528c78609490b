"""The per-language and per-script tables on a hand-built run (values by hand)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from sago_core.artifacts.layout import DELTAS_FILE, GENERATIONS_FILE, INSTANCES_FILE
from sago_core.axes.text_similarity import CROSS_LANGUAGE_BLEU
from sago_core.report.sections.language import (
    language_blocks,
    language_card,
    language_sections,
    language_tables,
)

DE, FW = "language:de:100:global", "script:fullwidth:25:prefix"
ENGLISH = "The director of the film was Ridley Scott, a British film maker."
GERMAN = "Der Regisseur des Films war Ridley Scott, ein britischer Filmemacher."
ENGLISH_TOO = "Nobody knows yet when the next episode of the series will come out."


def _deltas() -> pl.DataFrame:
    rows = []
    for pid, vid, family, subtype, strength, prob, lang in (
        ("p1", DE, "language", "de", 100.0, -0.2, 0.0),
        ("p2", DE, "language", "de", 100.0, -0.4, -1.0),
        ("p1", FW, "script", "fullwidth", 25.0, 0.1, None),
    ):
        axes = [("bleu", None, CROSS_LANGUAGE_BLEU if family == "language" else None)]
        axes += [("prob", prob, None)]
        if family == "language":
            axes.append(("lang", lang, None))
        for axis, value, reason in axes:
            rows.append(
                {
                    "model": "m",
                    "dataset": "toy",
                    "prompt_id": pid,
                    "variant_id": vid,
                    "family": family,
                    "subtype": subtype,
                    "strength": strength,
                    "position": "global",
                    "axis": axis,
                    "delta": value,
                    "delta_norm": value if axis != "bleu" or family != "language" else None,
                    "missing_reason": reason,
                }
            )
    frame = pl.DataFrame(rows, schema_overrides={"delta": pl.Float64, "delta_norm": pl.Float64})
    # the script row's BLEU is measured: 0.05
    return frame.with_columns(
        pl.when((pl.col("family") == "script") & (pl.col("axis") == "bleu"))
        .then(pl.lit(-0.05))
        .otherwise(pl.col("delta_norm"))
        .alias("delta_norm")
    )


def _instances() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "model": ["m"] * 3,
            "dataset": ["toy"] * 3,
            "prompt_id": ["p1", "p2", "p1"],
            "variant_id": [DE, DE, FW],
            "family": ["language", "language", "script"],
            "subtype": ["de", "de", "fullwidth"],
            "base_correct": [True, False, True],
            "variant_correct": [False, False, True],
            "correct_missing_reason": [None, None, None],
        }
    )


def _generations() -> pl.DataFrame:
    rows = [
        ("p1", "base", "base", "base", ENGLISH),
        ("p2", "base", "base", "base", ENGLISH_TOO),
        ("p1", DE, "language", "de", GERMAN),
        ("p2", DE, "language", "de", ENGLISH_TOO),
        ("p1", FW, "script", "fullwidth", ENGLISH),
    ]
    return pl.DataFrame(
        [
            {
                "model": "m",
                "dataset": "toy",
                "prompt_id": p,
                "variant_id": v,
                "family": f,
                "subtype": s,
                "response_text": a,
                "answer_text": a,
            }
            for p, v, f, s, a in rows
        ]
    )


def test_language_table_by_hand() -> None:
    languages, scripts = language_tables(_deltas(), _instances(), _generations())
    base, de = languages.to_dicts()
    assert base["subtype"] == "en (base)"
    assert base["lang_fidelity"] == 1.0 and base["n_lang"] == 2
    assert base["base_correct"] == 0.5  # p1 right, p2 wrong
    assert de["variants"] == 2
    assert abs(de["mean_abs_prob"] - 0.3) < 1e-12
    assert de["mean_abs_bleu"] is None and de["reason_bleu"] == CROSS_LANGUAGE_BLEU
    assert de["mean_abs_lang"] == 0.5
    assert de["lang_fidelity"] == 0.5 and de["n_lang"] == 2
    assert de["answers_in"] == "de 1, en 1"
    assert (de["base_correct"], de["variant_correct"]) == (0.5, 0.0)
    assert (de["flip_right_to_wrong"], de["flip_wrong_to_right"], de["n_judged"]) == (0.5, 0.0, 2)
    (fw,) = scripts.to_dicts()
    assert fw["subtype"] == "fullwidth" and fw["strengths"] == "25"
    assert abs(fw["mean_abs_bleu"] - 0.05) < 1e-12
    assert (fw["flip_right_to_wrong"], fw["variant_correct"]) == (0.0, 1.0)


def test_report_sections_and_card_blocks(tmp_path: Path) -> None:
    page = "".join(language_sections(_deltas(), _instances(), _generations()))
    assert "<h2>Per language</h2>" in page and "<h2>Per script</h2>" in page
    assert "0.500 (2)" in page  # lang fidelity of de
    assert f"bleu NA for de: {CROSS_LANGUAGE_BLEU}" in page
    for frame, name in (
        (_deltas(), DELTAS_FILE),
        (_instances(), INSTANCES_FILE),
        (_generations(), GENERATIONS_FILE),
    ):
        frame.write_parquet(tmp_path / name)
    card = language_card(tmp_path, "m")
    assert card["available"]
    blocks = language_blocks(card)
    assert [b[0] for b in blocks] == ["Per language", "Per script"]
    headers, rows = blocks[0][1], blocks[0][2]
    assert headers[0] == "language" and [r[0] for r in rows] == ["en (base)", "de"]
    assert (
        language_sections(
            _deltas().filter(pl.col("family") == "noise"), _instances(), _generations()
        )
        == []
    )


def test_a_machine_translation_is_asked_in_its_target_language() -> None:
    from sago_core.axes.language_fidelity import prompt_language
    from sago_core.report.sections.explorer import with_language

    frame = pl.DataFrame(
        {"family": ["language", "language", "script"], "subtype": ["mt:de", "ja", "fullwidth"]}
    )
    assert frame.select(prompt_language())[:, 0].to_list() == ["de", "ja", "en"]
    assert with_language(frame)["language"].to_list() == ["de", "ja", "en"]
