"""The language family in the pipeline: ``languages`` in the config,
parallel ``datasets`` entries, language variants built from the MKQA sample, refusal of
codes a file does not carry, BLEU/BERTScore across languages, and the ``lang`` axis.
Expected texts are read from the file with ``json`` (not through the reader under test);
expected verdicts are written by hand."""

from __future__ import annotations

import csv
import json
import logging
from pathlib import Path

import polars as pl
import pytest

from sago_core.axes.language_fidelity import lang_delta_rule, lang_measurements
from sago_core.axes.text_similarity import (
    bert_delta_rule,
    bleu_delta_rule,
    multilingual_encoder,
    without_cross_language,
)
from sago_core.config import PRESETS, build_config
from sago_core.data.loading import load_run_prompts
from sago_core.errors import ConfigError, InputError
from sago_core.registry.axes import axes, axes_for, axis_names, axis_spec
from sago_core.variants import build_variants
from sago_core.vocabulary import AXES

SAMPLE = "mkqa/mkqa_sample6.jsonl"
BLEU_REASON = "answers in different languages: BLEU is not comparable"


def _mkqa(shared_data: Path) -> Path:
    return shared_data / SAMPLE


def _config(dataset: str, languages: list[str] | None, n: int = 6):  # type: ignore[no-untyped-def]
    values: dict = {"datasets": [dataset], "n": n}
    if languages is not None:
        values["languages"] = languages
    return build_config("demo", values)


def _raw_queries(path: Path) -> dict[str, dict[str, str]]:
    """prompt_id -> queries, read with json alone (MKQA ids: mkqa-<example_id>)."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return {f"mkqa-{r['example_id']}": r["queries"] for r in rows}


# -- config ----------------------------------------------------------------------------


def test_languages_parse_and_derive_the_language_grid(shared_data: Path) -> None:
    entry = f"mkqa:{_mkqa(shared_data)}"
    config = _config(entry, ["de", "ja"])
    assert config.languages == ("de", "ja")
    assert config.variants.language is not None
    assert config.variants.language.languages == ("de", "ja")
    assert config.variants.language.sources == (entry,)
    dumped = config.model_dump(mode="json", by_alias=True)
    assert dumped["languages"] == ["de", "ja"]
    # a saved config (run_config.json) read back is the same run
    again = build_config("demo", dumped)
    assert again == config
    assert again.resolved_run_id() == config.resolved_run_id()


def test_a_run_without_languages_serialises_as_before() -> None:
    dumped = PRESETS["demo"].model_dump(mode="json", by_alias=True)
    assert "languages" not in dumped
    assert "language" not in dumped["variants"]
    assert "multilingual" not in dumped["bertscore"]
    assert build_config("demo").variants.language is None


def test_languages_without_a_parallel_dataset_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"mkqa:PATH or parallel:PATH"):
        build_config("demo", {"languages": ["de"]})


@pytest.mark.parametrize(
    ("languages", "words"),
    [
        (["de", "de"], "twice"),
        (["en", "de"], "base language"),
        ([], "at least one"),
        (["de", " "], "at least one"),
    ],
)
def test_bad_language_lists_are_refused(languages: list[str], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        build_config("demo", {"datasets": ["mkqa:x.jsonl"], "languages": languages})


def test_a_layout_prefix_without_a_file_is_refused() -> None:
    with pytest.raises(ConfigError, match="names no file"):
        build_config("demo", {"datasets": ["mkqa:"]})


def test_the_language_grid_is_not_written_by_hand(shared_data: Path) -> None:
    entry = f"mkqa:{_mkqa(shared_data)}"
    hand = {"languages": ["fr"], "sources": [entry]}
    with pytest.raises(ConfigError, match="derived from languages"):
        build_config(
            "demo", {"datasets": [entry], "languages": ["de"], "variants": {"language": hand}}
        )


def test_an_unknown_code_is_refused_listing_the_carried_codes(shared_data: Path) -> None:
    config = _config(f"mkqa:{_mkqa(shared_data)}", ["de", "jp"])
    with pytest.raises(InputError) as caught:
        load_run_prompts(config)
    text = str(caught.value)
    assert "'jp'" in text
    assert str(_mkqa(shared_data)) in text
    # the sample's 26 codes, by hand
    assert "ar, da, de, en, es, fi, fr, he, hu, it, ja, km, ko, ms, nl, no, pl, pt, ru, sv" in text
    assert "zh_cn, zh_hk, zh_tw" in text


def test_a_missing_parallel_file_is_refused(tmp_path: Path) -> None:
    config = _config(f"mkqa:{tmp_path / 'none.jsonl'}", ["de"])
    with pytest.raises(InputError, match="does not exist"):
        load_run_prompts(config)


# -- variants --------------------------------------------------------------------------


def test_language_variants_from_the_mkqa_sample(shared_data: Path) -> None:
    path = _mkqa(shared_data)
    config = _config(f"mkqa:{path}", ["de", "ja"])
    prompts = load_run_prompts(config)
    raw = _raw_queries(path)
    assert len(prompts) == 6
    assert {p.dataset for p in prompts} == {"mkqa_sample6"}
    assert {p.prompt_id: p.prompt for p in prompts} == {
        pid: q["en"].strip() for pid, q in raw.items()
    }
    variants = [v for v in build_variants(prompts, config.variants, 0) if v.family == "language"]
    assert len(variants) == 12
    for v in variants:
        assert v.variant_id == f"language:{v.subtype}:100:global"
        assert (v.strength, v.position) == (100.0, "global")
        assert v.text == raw[v.prompt_id][v.subtype].strip()
    ja = {v.prompt_id: v.text for v in variants if v.subtype == "ja"}
    assert (
        ja["mkqa-7631360939705650347"]
        == "2000年に公開された映画「グラディエーター」の監督は誰ですか？"
    )
    # the other families are untouched by the language family
    plain = build_config("demo", {"datasets": [f"mkqa:{path}"], "n": 6})
    without = build_variants(prompts, plain.variants, 0)
    with_languages = build_variants(prompts, config.variants, 0)
    assert [v for v in with_languages if v.family != "language"] == without


def test_a_row_without_one_language_loses_only_that_variant(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "two.jsonl"
    rows = [
        {
            "example_id": 1,
            "queries": {"en": "who wrote it", "de": "wer schrieb es", "ja": "誰が書いた"},
        },
        {"example_id": 2, "queries": {"en": "when was it", "de": "wann war es", "ja": ""}},
    ]
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
    config = _config(f"mkqa:{path}", ["de", "ja"])
    prompts = load_run_prompts(config)
    with caplog.at_level(logging.WARNING, logger="sago.variants"):
        variants = build_variants(prompts, config.variants, 0)
    language = sorted((v.prompt_id, v.subtype) for v in variants if v.family == "language")
    assert language == [("mkqa-1", "de"), ("mkqa-1", "ja"), ("mkqa-2", "de")]
    assert "1 language variant(s) missing" in caplog.text
    assert "row 2 (ja): the row's question in ja is empty" in caplog.text


def test_one_column_per_language_file(tmp_path: Path) -> None:
    path = tmp_path / "mine.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "question", "question_de", "answer"])
        writer.writerow(
            ["q1", "What is the capital of France?", "Was ist die Hauptstadt Frankreichs?", "Paris"]
        )
    config = _config(f"parallel:{path}", ["de"])
    prompts = load_run_prompts(config)
    assert [(p.prompt_id, p.prompt, p.references) for p in prompts] == [
        ("q1", "What is the capital of France?", ("Paris",))
    ]
    language = [v for v in build_variants(prompts, config.variants, 0) if v.family == "language"]
    assert [(v.variant_id, v.text) for v in language] == [
        ("language:de:100:global", "Was ist die Hauptstadt Frankreichs?")
    ]
    with pytest.raises(InputError, match="it carries de, en"):
        load_run_prompts(_config(f"parallel:{path}", ["fr"]))


# -- axes across languages ---------------------------------------------------------------


def _pairs_row_frame() -> pl.DataFrame:
    """Rows of the delta join, as far as BLEU/BERT read them: a noise and two language
    variants of one prompt."""
    return pl.DataFrame(
        {
            "model": ["m"] * 3,
            "dataset": ["d"] * 3,
            "prompt_id": ["p"] * 3,
            "variant_id": [
                "noise:spacing:5:global",
                "language:de:100:global",
                "language:ja:100:global",
            ],
            "family": ["noise", "language", "language"],
            "subtype": ["spacing", "de", "ja"],
            "bleu": [80.0, 12.0, 0.0],
            "bert_f1": [0.9, 0.7, 0.6],
            "thinking": [False] * 3,
            "base_thinking": [False] * 3,
        }
    )


def _apply(frame: pl.DataFrame, rule) -> tuple[list, list]:  # type: ignore[no-untyped-def]
    """A rule's (delta, reason) as deltas.py reads them: the reason where the delta is null."""
    value, reason = rule()
    out = frame.select(value.alias("d"), pl.when(value.is_null()).then(reason).alias("r"))
    return out["d"].to_list(), out["r"].to_list()


def test_bleu_across_languages_is_missing_with_its_reason() -> None:
    deltas, reasons = _apply(_pairs_row_frame(), bleu_delta_rule)
    assert deltas == [-20.0, None, None]
    assert reasons == [None, BLEU_REASON, BLEU_REASON]


@pytest.mark.parametrize(
    ("model", "declared", "multilingual"),
    [
        ("minilm-l6", None, False),
        ("roberta-large", None, False),
        ("xlm-roberta-large", None, True),
        ("/models/paraphrase-multilingual-MiniLM-L12-v2/", None, True),
        ("bert-base-multilingual-cased", None, True),
        ("sentence-transformers/LaBSE", None, True),
        ("/models/my-encoder", True, True),
        ("xlm-roberta-large", False, False),
    ],
)
def test_multilingual_encoder(model: str, declared: bool | None, multilingual: bool) -> None:
    assert multilingual_encoder(model, declared) is multilingual


def test_bertscore_across_languages_needs_a_multilingual_encoder() -> None:
    rows = _pairs_row_frame()
    generations = rows.select("model", "dataset", "prompt_id", "variant_id", "family")
    pairs = rows.select("model", "dataset", "prompt_id", "variant_id", "bleu", "bert_f1")
    english = without_cross_language(pairs, generations, multilingual_encoder("minilm-l6"))
    assert english.columns == pairs.columns
    assert english["bert_f1"].to_list() == [0.9, None, None]
    deltas, reasons = _apply(rows.with_columns(english["bert_f1"]), bert_delta_rule)
    assert deltas[0] == pytest.approx(-0.1)
    assert deltas[1:] == [None, None]
    assert reasons[0] is None
    assert all("encoder is English-only" in r for r in reasons[1:])
    multi = without_cross_language(pairs, generations, multilingual_encoder("xlm-roberta-large"))
    assert multi["bert_f1"].to_list() == [0.9, 0.7, 0.6]
    deltas, reasons = _apply(rows, bert_delta_rule)
    assert deltas == pytest.approx([-0.1, -0.3, -0.4])
    assert reasons == [None, None, None]


def test_a_run_without_language_variants_keeps_its_pairs() -> None:
    rows = _pairs_row_frame().filter(pl.col("family") == "noise")
    pairs = rows.select("model", "dataset", "prompt_id", "variant_id", "bleu", "bert_f1")
    generations = rows.select("model", "dataset", "prompt_id", "variant_id", "family")
    assert without_cross_language(pairs, generations, False).equals(pairs)


# -- the lang axis ---------------------------------------------------------------------


def test_lang_is_registered_for_the_language_family_only() -> None:
    assert "lang" not in axis_names()
    assert "lang" not in AXES
    assert [a.name for a in axes()] == ["act", "bleu", "bert", "prob", "ent", "mr"]
    assert [a.name for a in axes_for({"noise", "replay"})] == [a.name for a in axes()]
    assert [a.name for a in axes_for({"noise", "language"})][-1] == "lang"
    spec = axis_spec("lang")
    assert (spec.scale, spec.family) == (1.0, "language")


GERMAN = "Der Film wurde im Jahr 2017 in den Vereinigten Staaten veröffentlicht und war ein Erfolg."
ENGLISH = "The film was released in the United States in 2017 and it was a great success."
JAPANESE = "その映画は二〇一七年にアメリカ合衆国で公開され、大成功を収めました。"


def _generations() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "model": ["m"] * 5,
            "dataset": ["d"] * 5,
            "prompt_id": ["p"] * 5,
            "variant_id": [
                "base",
                "language:de:100:global",
                "language:ja:100:global",
                "language:zh_cn:100:global",
                "noise:spacing:5:global",
            ],
            "family": ["base", "language", "language", "language", "noise"],
            "subtype": ["base", "de", "ja", "zh_cn", "spacing"],
            "answer_text": [ENGLISH, GERMAN, ENGLISH, "Paris", JAPANESE],
            "thinking": [False] * 5,
            "base_thinking": [False] * 5,
        }
    )


def test_lang_measurements_on_known_strings() -> None:
    found = lang_measurements(_generations())
    assert found["prompt_language"].to_list() == ["en", "de", "ja", "zh_cn", "en"]
    assert found["detected_language"].to_list() == ["en", "de", "en", None, "ja"]
    assert found["lang_match"].to_list() == [1, 1, 0, None, 0]
    reasons = found["missing_reason"].to_list()
    assert reasons[:3] == [None, None, None] and reasons[4] is None
    assert "too short" in reasons[3]
    assert all(0.0 < c <= 1.0 for c in found["lang_confidence"].drop_nulls().to_list())


def test_lang_delta_rule() -> None:
    deltas, reasons = _apply(_generations(), lang_delta_rule)
    assert deltas == [0.0, 0.0, -1.0, None, -1.0]
    assert "too short" in reasons[3]
    assert [r for i, r in enumerate(reasons) if i != 3] == [None] * 4


def test_the_plan_shows_language_variants_per_language(shared_data: Path) -> None:
    from sago_core.run_plan import RunPlan, _language_lines

    config = _config(f"mkqa:{_mkqa(shared_data)}", ["de", "ja"], n=2)
    plan = RunPlan({"mkqa_sample6": 2}, {}, {}, {}, 0, {}, {}, languages={"de": 2, "ja": 1})
    assert _language_lines(plan, config) == [
        "  language variants by language: de 2, ja 1 (of 2 prompts); 1 missing (the file has "
        "no text for that row)"
    ]
    assert _language_lines(plan, build_config("demo")) == []
