"""Language identification for the ``lang`` axis: known sentences in 14
languages, written for this test (the expected language is the one each was written in),
and the missing values with their reasons."""

from __future__ import annotations

import pytest

from sago_core.axes.language_id import identify_language, primary_code

KNOWN = [
    ("en", "The capital of France is Paris, a city on the river Seine."),
    ("de", "Die Hauptstadt von Frankreich ist Paris, eine Stadt an der Seine."),
    ("fr", "La capitale de la France est Paris, une ville située sur la Seine."),
    ("es", "La capital de Francia es París, una ciudad a orillas del río Sena."),
    ("it", "La capitale della Francia è Parigi, una città sulla Senna."),
    ("pt", "A capital da França é Paris, uma cidade às margens do rio Sena."),
    ("nl", "De hoofdstad van Frankrijk is Parijs, een stad aan de Seine."),
    ("ru", "Столица Франции — Париж, город на реке Сене."),
    ("ja", "フランスの首都はパリで、セーヌ川のほとりにある都市です。"),
    ("zh_cn", "法国的首都是巴黎，一座位于塞纳河畔的城市。"),
    ("ar", "عاصمة فرنسا هي باريس، وهي مدينة تقع على نهر السين."),
    ("ko", "프랑스의 수도는 파리이며, 센강 변에 있는 도시입니다."),
    ("he", "בירת צרפת היא פריז, עיר השוכנת על נהר הסן."),
    ("vi", "Thủ đô của Pháp là Paris, một thành phố nằm bên bờ sông Seine."),
]


@pytest.mark.parametrize(("language", "text"), KNOWN)
def test_known_sentences_are_identified_and_match_their_prompts_language(
    language: str, text: str
) -> None:
    found = identify_language(text, language)
    assert found.detected == language.split("_")[0]
    assert found.matches == 1 and found.reason is None
    assert found.confidence is not None and 0 < found.confidence <= 1


@pytest.mark.parametrize(
    ("prompt_language", "text"),
    [("de", KNOWN[0][1]), ("ja", KNOWN[9][1]), ("en", KNOWN[7][1]), ("zh_tw", KNOWN[8][1])],
)
def test_an_answer_in_another_language_does_not_match(prompt_language: str, text: str) -> None:
    found = identify_language(text, prompt_language)
    assert found.matches == 0 and found.detected is not None and found.reason is None


def test_chinese_prompt_codes_match_a_chinese_answer() -> None:
    for code in ("zh_cn", "zh_tw", "zh_hk", "zh-TW", "zh"):
        assert identify_language(KNOWN[9][1], code).matches == 1


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (None, "empty answer: no language to identify"),
        ("   ", "empty answer: no language to identify"),
        ("Paris", "answer too short to identify its language (5 letters, fewer than 8)"),
        ("2017-05-18", "answer too short to identify its language (0 letters, fewer than 8)"),
        ("巴黎", "answer too short to identify its language (6 letters, fewer than 8)"),
    ],
)
def test_too_little_text_is_missing_with_a_reason(answer: str | None, reason: str) -> None:
    found = identify_language(answer, "fr")
    assert (found.detected, found.matches, found.confidence) == (None, None, None)
    assert found.reason == reason


def test_the_letter_floor_is_a_parameter() -> None:
    assert identify_language("Paris", "fr", min_letters=20).reason is not None
    assert identify_language(KNOWN[1][1], "de", min_letters=60).reason == (
        "answer too short to identify its language (53 letters, fewer than 60)"
    )


def test_primary_codes() -> None:
    assert [primary_code(c) for c in ("zh_cn", "pt-BR", "EN", "yue", "nn", "arz")] == [
        "zh",
        "pt",
        "en",
        "zh",
        "no",
        "ar",
    ]


def test_a_cjk_character_counts_as_three_letters() -> None:
    # seven characters, 21 weighted letters: enough to tell, not "too short"
    found = identify_language("日本の首都です", "ja")
    assert found.reason is None
    assert (found.detected, found.matches) == ("ja", 1)
