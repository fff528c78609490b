"""Parallel questions: the MKQA reader against the real sample, and the
one-column-per-language user file. Expected values are read off the sample by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sago_core.data.mkqa import read_language_columns, read_mkqa
from sago_core.errors import InputError

MKQA_CODES = [
    "ar",
    "da",
    "de",
    "en",
    "es",
    "fi",
    "fr",
    "he",
    "hu",
    "it",
    "ja",
    "km",
    "ko",
    "ms",
    "nl",
    "no",
    "pl",
    "pt",
    "ru",
    "sv",
    "th",
    "tr",
    "vi",
    "zh_cn",
    "zh_hk",
    "zh_tw",
]
GLADIATOR_ID = "mkqa-7631360939705650347"  # row 6 of the sample


@pytest.fixture(scope="module")
def sample(shared_data: Path) -> Path:
    return shared_data / "mkqa" / "mkqa_sample6.jsonl"


def _rows(sample: Path) -> list[dict]:
    return [json.loads(line) for line in sample.read_text(encoding="utf-8").splitlines()]


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
    return path


def test_every_language_of_the_sample_is_read(sample: Path) -> None:
    read = read_mkqa(sample)
    assert read.carried == tuple(MKQA_CODES) and read.languages == tuple(MKQA_CODES)
    assert len(read.questions) == 6 * 26 and read.missing == ()


def test_the_asked_languages_share_one_prompt_id_per_question(sample: Path) -> None:
    read = read_mkqa(sample, ["de", "ja", "ar", "zh_cn", "ru"])
    assert read.languages == ("de", "ja", "ar", "zh_cn", "ru")
    assert [q.language for q in read.questions[:5]] == ["de", "ja", "ar", "zh_cn", "ru"]
    ja = read.in_language("ja")
    assert len(ja) == 6 and ja[0].prompt_id == "mkqa-36228854473990432"
    assert ja[0].prompt == "help me help youはいつ発表されましたか"
    gladiator = [q.prompt for q in read.questions if q.prompt.prompt_id == GLADIATOR_ID]
    assert [p.prompt for p in gladiator] == [
        "Wer war der Regisseur des Films Gladiator, der im Jahr 2000 veröffentlicht wurde?",
        "2000年に公開された映画「グラディエーター」の監督は誰ですか？",
        "من هو مخرج فلم غلادييتور الذي صدر عام ألفين",
        "2000年发布的电影角斗士的导演是谁",
        "кто является режисером фильма гладиатора, который был выпущен в 2000 году",
    ]
    assert all(p.dataset == "mkqa_sample6" for p in gladiator)
    assert gladiator[1].source == f"{sample}, row 6"


def test_references_are_each_languages_answer_texts_and_aliases(sample: Path) -> None:
    read = read_mkqa(sample, ["en", "ja"])
    mountain = [
        q.prompt for q in read.questions if q.prompt.prompt_id == "mkqa--7449157003522518870"
    ]
    en, ja = mountain
    assert en.references[0] == "Hafþór Júlíus Björnsson"
    assert "Hafthor Julius Bjornsson" in en.references
    assert ja.references == ("ハフソー・ユリウス・ビョルンソン", "ハフソル・ユリウス・ビョルンソン")
    first = read.in_language("ja")[0]
    assert first.references[:2] == ("2017", "2017-05-18") and "2017 五月 18" in first.references


def test_questions_without_a_short_answer_say_why(sample: Path) -> None:
    read = read_mkqa(sample, ["ar"])
    long_answer, unanswerable = read.in_language("ar")[1:3]
    assert long_answer.references == () and unanswerable.references == ()
    assert long_answer.no_references == (
        "MKQA answers this question in ar only with a long passage (no short gold answer)"
    )
    assert unanswerable.no_references == "MKQA marks this question unanswerable in ar"


@pytest.mark.parametrize(
    ("asked", "hint"),
    [(["de", "xx"], "'xx'"), (["zh-cn"], "did you mean 'zh_cn'?"), (["en", "EN"], "'EN'")],
)
def test_a_language_the_file_does_not_carry_is_refused_listing_what_it_carries(
    sample: Path, asked: list[str], hint: str
) -> None:
    with pytest.raises(InputError) as caught:
        read_mkqa(sample, asked)
    message = str(caught.value)
    assert str(sample) in message and hint in message
    assert "it carries ar, da, de, en, es, fi, fr, he, hu, it, ja, km, ko" in message


def test_a_language_asked_twice_is_refused(sample: Path) -> None:
    with pytest.raises(InputError, match="twice"):
        read_mkqa(sample, ["de", "de"])


def test_a_row_without_a_language_loses_only_that_language(sample: Path, tmp_path: Path) -> None:
    rows = _rows(sample)
    del rows[1]["queries"]["de"]
    rows[2]["queries"]["ja"] = "  "
    rows[3]["queries"]["ja"] = None
    path = _write_jsonl(tmp_path / "gaps.jsonl", rows)
    read = read_mkqa(path, ["de", "ja", "en"])
    assert len(read.questions) == 6 * 3 - 3
    assert [(m.prompt_id, m.language, m.reason, m.source) for m in read.missing] == [
        ("mkqa-7721692200040168186", "de", "the row has no question in de", f"{path}, row 2"),
        ("mkqa-2961317153244610375", "ja", "the row's question in ja is empty", f"{path}, row 3"),
        ("mkqa-2904274678882358283", "ja", "the row has no question in ja", f"{path}, row 4"),
    ]
    assert len(read.in_language("en")) == 6 and len(read.in_language("de")) == 5


def test_bad_rows_are_errors_naming_file_row_and_column(sample: Path, tmp_path: Path) -> None:
    rows = _rows(sample)
    rows[2]["queries"]["de"] = 42
    with pytest.raises(InputError, match=r"row 3, column 'queries.de': must be text, got int"):
        read_mkqa(_write_jsonl(tmp_path / "number.jsonl", rows), ["de"])
    rows = _rows(sample)
    rows[4]["queries"] = ["not", "a", "mapping"]
    with pytest.raises(InputError, match=r"row 5, column 'queries': must be a mapping"):
        read_mkqa(_write_jsonl(tmp_path / "list.jsonl", rows))


def test_a_file_with_one_question_column_per_language(tmp_path: Path) -> None:
    path = tmp_path / "capitals.csv"
    path.write_text(
        "question,question_de,question_zh_cn,answer,answer_de\n"
        "What is the capital of France?,Was ist die Hauptstadt von Frankreich?,"
        "法国的首都是哪里？,Paris,Paris\n"
        "Who wrote Faust?,,《浮士德》的作者是谁？,Goethe,\n",
        encoding="utf-8",
    )
    read = read_language_columns(path)
    assert read.carried == ("de", "en", "zh_cn")
    assert [(m.language, m.reason, m.source) for m in read.missing] == [
        ("de", "the row's question in de is empty", f"{path}, row 2")
    ]
    by_language = {lang: read.in_language(lang) for lang in read.languages}
    assert [p.prompt for p in by_language["zh_cn"]] == [
        "法国的首都是哪里？",
        "《浮士德》的作者是谁？",
    ]
    ids = {p.prompt_id for p in by_language["en"]}
    assert {p.prompt_id for p in by_language["zh_cn"]} == ids and len(ids) == 2
    assert by_language["de"][0].references == ("Paris",)
    assert by_language["zh_cn"][0].references == ()
    assert by_language["zh_cn"][0].no_references == (
        "the file has no answer column for zh_cn (answer_zh_cn)"
    )
    with pytest.raises(InputError, match=r"'fr' not in the file; it carries de, en, zh_cn"):
        read_language_columns(path, ["de", "fr"])


def test_a_language_file_with_ids_and_another_base_language(tmp_path: Path) -> None:
    path = _write_jsonl(
        tmp_path / "fragen.jsonl",
        [
            {"id": "q1", "frage": "Wie hoch ist die Zugspitze?", "frage_en": "How high is it?"},
            {"id": "q2", "frage": "Wer malte die Mona Lisa?", "frage_en": None},
        ],
    )
    read = read_language_columns(path, ["en"], base_language="de", question="frage")
    assert read.carried == ("de", "en")
    assert [p.prompt_id for p in read.in_language("en")] == ["q1"]
    assert [(m.prompt_id, m.reason) for m in read.missing] == [
        ("q2", "the row has no question in en")
    ]
    with pytest.raises(InputError, match=r"no question column \('question'"):
        read_language_columns(path)
