"""The script variant family: full-width forms, homoglyphs, diacritics added and
stripped, romanisation and Simplified <-> Traditional, on real prompts including MKQA's
non-Latin queries. Expected texts are written out by hand (checked against each script's
rules), never recomputed with the code under test."""

from __future__ import annotations

import json
import random
import unicodedata
from pathlib import Path

import pytest

from sago_core.config import PRESETS, ScriptGrid, VariantGrid, build_config
from sago_core.data.builtin import builtin_prompts
from sago_core.data.prompt import Prompt
from sago_core.errors import ConfigError
from sago_core.variants import build_variants
from sago_core.variants.romanization import convert_han, romanize
from sago_core.variants.script import (
    accented_forms,
    add_diacritics,
    homoglyph_map,
    strip_diacritics,
    to_fullwidth,
    to_homoglyphs,
)

PROMPT = "Which composer wrote the Moonlight Sonata in the year eighteen hundred and one?"
PERCENTS = [10, 25, 50, 75, 100]
POSITIONS = ["prefix", "suffix", "global"]
# Cyrillic letters that look like Latin a, c, e, o, p, x (Unicode confusables, by hand).
CYRILLIC = {
    "a": "\u0430",
    "c": "\u0441",
    "e": "\u0435",
    "o": "\u043e",
    "p": "\u0440",
    "x": "\u0445",
}


@pytest.fixture(scope="module")
def mkqa(shared_data: Path) -> list[dict[str, str]]:
    lines = (shared_data / "mkqa" / "mkqa_sample6.jsonl").read_text(encoding="utf-8")
    return [json.loads(line)["queries"] for line in lines.splitlines()]


def _halves(text: str, position: str) -> tuple[int, int]:
    """The region by hand: first half, second half, or all (len // 2 splits)."""
    return {"prefix": (0, len(text) // 2), "suffix": (len(text) // 2, len(text))}.get(
        position, (0, len(text))
    )


def _changed(before: str, after: str) -> list[int]:
    assert len(before) == len(after)
    return [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]


@pytest.mark.parametrize("percent", PERCENTS)
@pytest.mark.parametrize("position", POSITIONS)
def test_fullwidth_turns_the_share_of_ascii_into_fullwidth_inside_the_region(
    percent: int, position: str
) -> None:
    out = to_fullwidth(PROMPT, percent, position, random.Random(4))
    start, end = _halves(PROMPT, position)
    eligible = [i for i in range(start, end) if 0x21 <= ord(PROMPT[i]) <= 0x7E]
    changed = _changed(PROMPT, out)
    assert len(changed) == round(len(eligible) * percent / 100)
    assert all(start <= i < end for i in changed)
    # Full-width forms sit 0xFEE0 above ASCII (Unicode's Halfwidth and Fullwidth Forms).
    assert all(ord(out[i]) - ord(PROMPT[i]) == 0xFEE0 for i in changed)
    assert out.count(" ") == PROMPT.count(" ")  # spaces are never touched


def test_fullwidth_at_100_is_what_an_ime_types() -> None:
    out = to_fullwidth("Gladiator (2000)?", 100, "global", random.Random(0))
    assert out == "Ｇｌａｄｉａｔｏｒ （２０００）？"


def test_homoglyphs_are_cyrillic_look_alikes() -> None:
    assert {k: homoglyph_map()[k] for k in CYRILLIC} == CYRILLIC
    assert to_homoglyphs("apex coop", 100, "global", random.Random(0)) == (
        "\u0430\u0440\u0435\u0445 \u0441\u043e\u043e\u0440"
    )
    for letter, glyph in homoglyph_map().items():
        assert letter.isascii() and letter.isalpha()
        assert unicodedata.name(glyph).split()[0] in ("CYRILLIC", "GREEK"), glyph


@pytest.mark.parametrize("percent", PERCENTS)
@pytest.mark.parametrize("position", POSITIONS)
def test_homoglyphs_replace_the_share_of_letters_with_a_look_alike(
    percent: int, position: str
) -> None:
    text = "a cape of coax, a pox on pop, ape cap expo " * 2
    out = to_homoglyphs(text, percent, position, random.Random(9))
    start, end = _halves(text, position)
    eligible = [i for i in range(start, end) if text[i] in CYRILLIC]
    changed = _changed(text, out)
    assert len(changed) == round(len(eligible) * percent / 100)
    assert all(start <= i < end and out[i] == CYRILLIC[text[i]] for i in changed)


def test_accented_forms_of_n_and_none_for_b() -> None:
    assert accented_forms()["n"] == ("ñ", "ń", "ņ", "ň")
    assert "b" not in accented_forms() and "x" not in accented_forms()


@pytest.mark.parametrize("percent", PERCENTS)
@pytest.mark.parametrize("position", POSITIONS)
def test_diacritics_added_to_the_share_of_letters_that_take_one(
    percent: int, position: str
) -> None:
    text = "an ice cone, a tune in a sea"  # every letter takes an accent in Latin-1/-A
    out = add_diacritics(text, percent, position, random.Random(2))
    start, end = _halves(text, position)
    eligible = [i for i in range(start, end) if text[i].isalpha()]
    changed = _changed(text, out)
    assert len(changed) == round(len(eligible) * percent / 100)
    for i in changed:
        decomposed = unicodedata.normalize("NFD", out[i])
        assert decomposed[0] == text[i] and len(decomposed) == 2
        assert unicodedata.combining(decomposed[1])


def test_diacritics_are_never_stacked_on_a_marked_letter() -> None:
    text = "e\u0301te"  # e + combining acute, then t e
    out = add_diacritics(text, 100, "global", random.Random(0))
    assert out[:2] == "e\u0301" and out[2] != "t" and out[3] != "e"


def test_diacritics_stripped_from_german_and_vietnamese_mkqa(
    mkqa: list[dict[str, str]],
) -> None:
    de, vi = mkqa[5]["de"], mkqa[5]["vi"]
    assert strip_diacritics(de, 100, "global", random.Random(0)) == (
        "Wer war der Regisseur des Films Gladiator, der im Jahr 2000 veroffentlicht wurde?"
    )
    # đ is a letter of its own (no decomposition), so it stays.
    assert vi == "Ai là đạo diễn của phim gladiator được ra mắt năm 2000"
    assert strip_diacritics(vi, 100, "global", random.Random(0)) == (
        "Ai la đao dien cua phim gladiator đuoc ra mat nam 2000"
    )


def test_stripping_keeps_marks_that_spell_another_letter(mkqa: list[dict[str, str]]) -> None:
    for text in ("が", "й", mkqa[0]["ja"], mkqa[5]["ru"]):
        assert strip_diacritics(text, 100, "global", random.Random(0)) == text


def test_stripping_a_share_strips_that_many() -> None:
    text = "déjà vu à côté, façade naïve"  # é à à ô é ç ï: 7 accented letters
    out = strip_diacritics(text, 50, "global", random.Random(1))
    assert len(_changed(text, out)) == 4  # round(3.5) is 4 (banker's rounding: 4 is even)


def test_romanisation_of_mkqa_japanese_chinese_russian_arabic(
    mkqa: list[dict[str, str]],
) -> None:
    gladiator = mkqa[5]
    ja = romanize(gladiator["ja"])
    assert ja is not None and ja.subtype == "romanize_hepburn"
    # 2000年に公開された映画「グラディエーター」の監督は誰ですか？ (loan word as written)
    assert ja.text == '2000 nen ni koukai sareta eiga "guradieetaa" no kantoku wa dare desu ka?'
    zh = romanize(gladiator["zh_cn"])  # 2000年发布的电影角斗士的导演是谁
    assert zh is not None and zh.subtype == "romanize_pinyin"
    assert zh.text == "2000 nian fa bu de dian ying jue dou shi de dao yan shi shui"
    ru = romanize(gladiator["ru"])
    assert ru is not None and ru.subtype == "romanize_anyascii"
    assert ru.text == (
        "kto yavlyaetsya rezhiserom fil'ma gladiatora, kotoryy byl vypushchen v 2000 godu"
    )
    ar = romanize(gladiator["ar"])  # من هو مخرج فلم غلادييتور ...
    assert ar is not None and ar.subtype == "romanize_anyascii"
    assert ar.text.startswith("mn hw mkhrj flm")  # m-n h-w m-kh-r-j f-l-m, consonants only


def test_every_non_latin_mkqa_query_romanises_to_ascii(mkqa: list[dict[str, str]]) -> None:
    latin = {"da", "de", "en", "es", "fi", "fr", "hu", "it", "ms", "nl", "no", "pl", "pt"}
    latin |= {"sv", "tr", "vi"}
    for queries in mkqa:
        for lang, text in queries.items():
            done = romanize(text)
            if lang in latin:
                assert done is None, (lang, text)
                continue
            assert done is not None and done.text.isascii() and done.text.strip(), (lang, text)


def test_simplified_and_traditional_chinese_swap(mkqa: list[dict[str, str]]) -> None:
    hans = convert_han(mkqa[5]["zh_cn"])
    assert hans is not None and hans.subtype == "hans_to_hant"
    assert hans.text == "2000年發佈的電影角鬥士的導演是誰"
    hant = convert_han(mkqa[5]["zh_tw"])  # 誰是2000年上映的神鬼戰士的導演
    assert hant is not None and hant.subtype == "hant_to_hans"
    assert hant.text == "谁是2000年上映的神鬼战士的导演"
    assert convert_han(mkqa[5]["ja"]) is None  # Japanese kanji are neither set
    assert convert_han(PROMPT) is None
    assert romanize(PROMPT) is None


SCRIPT_ONLY = {"register": None, "noise": None, "structural": None, "replay": False}


def test_the_family_is_off_unless_asked_for_and_off_serialises_as_before() -> None:
    assert VariantGrid().script is None
    assert "script" not in VariantGrid().model_dump()
    assert PRESETS["demo"].resolved_run_id() == "demo-c30dbf3a6301"
    on = build_config("demo", {"variants": {"script": {}}})
    assert on.variants.script == ScriptGrid()
    assert on.model_dump()["variants"]["script"]["fullwidth"] == (10, 25, 50, 75, 100)
    assert on.resolved_run_id() != "demo-c30dbf3a6301"
    assert build_config("demo", {"variants": {"script": None}}).resolved_run_id() == (
        "demo-c30dbf3a6301"
    )


@pytest.mark.parametrize("bad", [0, 101])
def test_script_percentages_outside_1_to_100_are_refused(bad: int) -> None:
    with pytest.raises(ConfigError, match="script percentages"):
        build_config("demo", {"variants": {"script": {"homoglyphs": [bad]}}})


def test_grid_builds_the_script_family_with_readable_ids_and_seeds() -> None:
    grid = VariantGrid.model_validate({**SCRIPT_ONLY, "script": {}})
    prompts = builtin_prompts()[:3]
    variants = build_variants(prompts, grid, 5)
    # An English prompt: 3 ladders (no diacritics to strip) x 5 percents x 3 positions,
    # nothing to romanise or convert.
    per_prompt = {p.prompt_id: 0 for p in prompts}
    for v in variants:
        per_prompt[v.prompt_id] += 1
        assert v.family == "script"
        assert v.variant_id == f"script:{v.subtype}:{int(v.strength)}:{v.position}"
        assert v.text != next(p.prompt for p in prompts if p.prompt_id == v.prompt_id)
    assert set(per_prompt.values()) == {45}
    again = build_variants(prompts[::-1], grid, 5)
    assert {(v.prompt_id, v.variant_id, v.text) for v in again} == {
        (v.prompt_id, v.variant_id, v.text) for v in variants
    }
    other = {(v.prompt_id, v.variant_id): v.text for v in build_variants(prompts, grid, 6)}
    assert other != {(v.prompt_id, v.variant_id): v.text for v in variants}


def test_grid_on_mkqa_builds_only_the_transforms_that_change_each_language(
    mkqa: list[dict[str, str]],
) -> None:
    grid = VariantGrid.model_validate(
        {
            **SCRIPT_ONLY,
            "script": {
                "positions": ["global"],
                "fullwidth": [50],
                "homoglyphs": [50],
                "diacritics_added": [50],
            },
        }
    )
    queries = mkqa[5]
    prompts = [Prompt("mkqa", lang, queries[lang], ()) for lang in ("ja", "ar", "zh_cn", "de")]
    ids: dict[str, set[str]] = {}
    for v in build_variants(prompts, grid, 0):
        ids.setdefault(v.prompt_id, set()).add(v.variant_id)
    assert ids["ar"] == {"script:romanize_anyascii:100:global"}  # no ASCII, no Latin letter
    assert ids["ja"] == {"script:romanize_hepburn:100:global", "script:fullwidth:50:global"}
    assert ids["zh_cn"] == {
        "script:romanize_pinyin:100:global",
        "script:hans_to_hant:100:global",
        "script:fullwidth:50:global",
    }
    assert ids["de"] == {
        "script:fullwidth:50:global",
        "script:homoglyph:50:global",
        "script:diacritics_added:50:global",
        "script:diacritics_stripped:100:global",
    }


@pytest.mark.parametrize(
    "text", ["Compute 2π r for r = 3.", "A cell is about 5 µm wide.", "The 1º step."]
)
def test_an_english_prompt_with_one_non_latin_letter_is_not_romanised(text: str) -> None:
    assert romanize(text) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Кто автор?\nA) Толстой\nB) Пушкин", "Kto avtor?\nA) Tolstoy\nB) Pushkin"),
        ("谁是作者？\nA) 鲁迅\nB) 老舍", None),
        ("作者は誰ですか？\nA) 夏目漱石\nB) 太宰治", None),
    ],
)
def test_a_multi_line_prompt_keeps_its_lines(text: str, expected: str | None) -> None:
    done = romanize(text)
    assert done is not None and done.text.isascii()
    assert len(done.text.split("\n")) == 3
    assert done.text.split("\n")[1].startswith("A) ") and done.text.split("\n")[2].startswith("B) ")
    if expected is not None:
        assert done.text == expected
