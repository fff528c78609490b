"""Machine translation and round trips with a scripted fake translator: the
variants, the back-translation check, the cache, the budget stop and the config's refusals."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import polars as pl
import pytest

from sago_core.artifacts.json_cache import JsonCache
from sago_core.backends.api_ledger import BudgetExhausted
from sago_core.backends.protocol import Generation
from sago_core.config import RunConfig, TranslationSettings, build_config
from sago_core.errors import ConfigError
from sago_core.stages.translation import BackCheck, translate_prompts
from sago_core.variants.translation import clean_translation, translated_language
from tests.fakes import PROMPTS, FakeBackend

FRANCE, HAMLET = PROMPTS["prompt"].to_list()
FRANCE_DE = "Was ist die Hauptstadt von Frankreich?"
HAMLET_DE = "Wer hat das Theaterstück Hamlet geschrieben?"
HAMLET_JA = "ハムレットという劇を書いたのは誰ですか？"
# (target language named in the instruction, text) -> the translator's answer
ANSWERS = {
    ("German", FRANCE): f"Translation: {FRANCE_DE}\nNote: a formal question.",
    ("German", HAMLET): HAMLET_DE,
    ("Japanese", FRANCE): "What is the capital of France, please?",  # not Japanese
    ("Japanese", HAMLET): f"「{HAMLET_JA}」",
    ("English", FRANCE_DE): "What is the capital city of France?",
    ("English", HAMLET_DE): "Who cooked the dinner yesterday?",  # the meaning drifted
    ("English", HAMLET_JA): HAMLET,  # the round trip came home unchanged
}
# The semantic filter's scorer, scripted: BERTScore-F1 of each back-translation vs its base.
SCORES = {
    "What is the capital city of France?": 0.95,
    "Who cooked the dinner yesterday?": 0.40,
    HAMLET: 1.0,
}
CHECK = BackCheck(lambda texts, bases: [SCORES[t] for t in texts], threshold=0.78)


def _asked(instruction: str) -> tuple[str, str]:
    """(the target language's name, the text) an instruction asks to translate."""
    target = re.search(r" into (\w+)\.", instruction)
    assert target is not None
    return target.group(1), instruction.split("\n\nText: ", 1)[1]


def translator(instruction: str) -> str:
    return ANSWERS[_asked(instruction)]


def settings(**values: object) -> TranslationSettings:
    return TranslationSettings.model_validate({"languages": ["de", "ja"], **values})


def run(backend: FakeBackend, cache: JsonCache, **values: object) -> pl.DataFrame:
    return translate_prompts(PROMPTS, settings(**values), backend, "fake@1", cache, 0, CHECK)


def by_id(frame: pl.DataFrame) -> dict[tuple[str, str], dict]:
    return {(r["prompt_id"], r["variant_id"]): r for r in frame.iter_rows(named=True)}


def test_translations_back_checks_and_round_trips(tmp_path: Path) -> None:
    backend = FakeBackend(translator)
    rows = by_id(run(backend, JsonCache(tmp_path)))
    assert backend.generate_calls == 2  # every translation, then every usable one back
    assert len(backend.prompts_seen) == 4 + 3

    de = rows[("p1", "language:mt:de:100:global")]
    assert (de["family"], de["subtype"], de["strength"], de["position"]) == (
        "language",
        "mt:de",
        100.0,
        "global",
    )
    assert de["text"] == FRANCE_DE and de["kept"] and de["semantic_score"] == 0.95
    assert (
        de["translator"] == "fake@1"
        and de["back_translation"] == "What is the capital city of France?"
    )
    trip = rows[("p1", "round_trip:de:100:global")]
    assert (trip["family"], trip["subtype"]) == ("round_trip", "de")
    assert trip["text"] == "What is the capital city of France?" and trip["kept"]
    assert trip["translation"] == FRANCE_DE, "a round trip records its intermediate text"

    drifted = rows[("p2", "language:mt:de:100:global")]
    assert not drifted["kept"] and drifted["semantic_score"] == 0.4
    assert drifted["reject_reason"] == "back-translation semantic score 0.4 <= threshold 0.78"
    assert rows[("p2", "round_trip:de:100:global")]["reject_reason"] == (
        "semantic score 0.4 <= threshold 0.78"
    )

    english = rows[("p1", "language:mt:ja:100:global")]
    assert not english["kept"]
    assert english["reject_reason"] == "translation is in en, not ja (py3langid)"
    assert rows[("p1", "round_trip:ja:100:global")]["reject_reason"] == (
        "no translation into ja to translate back (translation is in en, not ja (py3langid))"
    )

    ja = rows[("p2", "language:mt:ja:100:global")]
    assert ja["text"] == HAMLET_JA and ja["kept"], "the wrapping quotes are gone"
    home = rows[("p2", "round_trip:ja:100:global")]
    assert home["text"] == HAMLET and not home["kept"]
    assert home["reject_reason"].startswith("round trip returned the prompt unchanged")


def test_a_round_trip_stays_english_and_off_means_no_back_translation(tmp_path: Path) -> None:
    from sago_core.axes.language_id import identify_language

    frame = run(FakeBackend(translator), JsonCache(tmp_path))
    for text in frame.filter(pl.col("family") == "round_trip", pl.col("kept"))["text"]:
        assert identify_language(text, "en").matches == 1
    german = {**ANSWERS, ("English", HAMLET_DE): "Wer schrieb das Theaterstück Hamlet?"}
    stuck = by_id(
        run(FakeBackend(lambda i: german[_asked(i)]), JsonCache(tmp_path / "de"), languages=["de"])
    )
    assert stuck[("p2", "round_trip:de:100:global")]["reject_reason"] == (
        "back-translation: text is in de, not en (py3langid)"
    )
    assert not stuck[("p2", "language:mt:de:100:global")]["kept"]
    backend = FakeBackend(translator)
    plain = run(backend, JsonCache(tmp_path / "other"), round_trip=False, back_check=False)
    assert len(backend.prompts_seen) == 4 and set(plain["family"]) == {"language"}
    assert plain["semantic_score"].null_count() == 4
    assert plain.filter(pl.col("prompt_id") == "p2")["kept"].to_list() == [True, True]


def test_a_rerun_reads_the_cache_and_calls_no_model(tmp_path: Path) -> None:
    cache = JsonCache(tmp_path)
    first = run(FakeBackend(translator), cache)
    again = FakeBackend(translator)
    assert run(again, cache).equals(first)
    # Only the unusable answer (English instead of Japanese) is not cached: asked again.
    assert again.prompts_seen == [_instruction("ja")]
    german = FakeBackend(translator)
    run(german, cache, languages=["de"])
    assert german.generate_calls == 0
    other = FakeBackend(translator)
    translate_prompts(PROMPTS, settings(languages=["de"]), other, "fake@2", cache, 0, CHECK)
    assert len(other.prompts_seen) == 4, "another translator identity misses the cache"


def _instruction(code: str) -> str:
    from sago_core.variants.translation import translate_instruction

    return translate_instruction(FRANCE, "en", code)


class BudgetedBackend(FakeBackend):
    """Answers one generate call, then stops as the API ledger does when the budget is spent."""

    def generate(
        self, prompts: Sequence[str], max_new_tokens: int, batch_size: int
    ) -> list[Generation]:
        if self.generate_calls:
            raise BudgetExhausted("API budget reached: request budget reached (4 of 4)")
        return super().generate(prompts, max_new_tokens, batch_size)


def test_a_spent_budget_stops_the_stage_and_keeps_the_finished_translations(
    tmp_path: Path,
) -> None:
    cache = JsonCache(tmp_path)
    with pytest.raises(BudgetExhausted, match="budget"):
        run(BudgetedBackend(translator), cache)
    resumed = FakeBackend(translator)
    run(resumed, cache)
    # the three usable translations came from the cache: only the back pass (and the
    # uncached Japanese answer of p1) is asked
    assert resumed.prompts_seen[0] == _instruction("ja")
    assert len(resumed.prompts_seen) == 1 + 3


class CutOffBackend(FakeBackend):
    """Every answer ran into the token limit; the Japanese ones failed outright."""

    def generate(
        self, prompts: Sequence[str], max_new_tokens: int, batch_size: int
    ) -> list[Generation]:
        return [
            Generation(g.response_text, g.response_token_ids, "length")
            if "into Japanese" not in p
            else Generation("", (), "failed", failure_reason="timeout after 4 retries")
            for p, g in zip(
                prompts, super().generate(prompts, max_new_tokens, batch_size), strict=True
            )
        ]


def test_a_translation_cut_off_by_the_token_limit_or_a_failed_call_is_refused(
    tmp_path: Path,
) -> None:
    rows = by_id(run(CutOffBackend(translator), JsonCache(tmp_path), round_trip=False))
    # p1's first line is whole (the answer went on after it), its back-translation was cut;
    # p2's one line was cut short
    whole = rows[("p1", "language:mt:de:100:global")]
    assert whole["text"] == FRANCE_DE and whole["back_translation"] is not None
    assert whole["reject_reason"] == "back-translation: cut off at max_new_tokens 128"
    assert rows[("p2", "language:mt:de:100:global")]["reject_reason"] == (
        "cut off at max_new_tokens 128"
    )
    assert rows[("p1", "language:mt:ja:100:global")]["reject_reason"] == (
        "tool call failed: timeout after 4 retries"
    )


def test_cleaning_and_the_language_of_a_subtype() -> None:
    assert clean_translation("Translation: « Bonjour »\nMore", "Hello") == "Bonjour"
    assert clean_translation("  German translation: Hallo Welt  ", "Hello world") == "Hallo Welt"
    assert clean_translation("Zeile eins\nZeile zwei", "line one\nline two") == (
        "Zeile eins\nZeile zwei"
    )
    assert translated_language("mt:zh_cn") == "zh_cn" and translated_language("de") == "de"


def test_translation_is_absent_from_the_serialised_config_when_off() -> None:
    config = RunConfig()
    assert "translation" not in config.model_dump(mode="json", by_alias=True)["variants"]
    on = build_config("demo", {"variants": {"translation": {"languages": ["de", "zh_cn"]}}})
    assert on.variants.translation is not None
    assert on.variants.translation.translator == "hf:smollm2-135m"
    assert on.variants.translation.languages == ("de", "zh_cn")
    assert on.result_hash() != build_config("demo").result_hash()


@pytest.mark.parametrize(
    ("translation", "words"),
    [
        (
            {"languages": ["de"], "translater": "mock:t"},
            "variants.translation.translater: unknown key",
        ),
        ({"languages": []}, "variants.translation.languages: Value error, must name at least one"),
        (
            {"languages": ["de", "xx"]},
            "variants.translation.languages: Value error, ['xx'] not among",
        ),
        ({"languages": ["en"]}, "'en' is the prompts' own language"),
        ({"languages": ["de", "de"]}, "name a language twice"),
        ({"languages": ["de"], "translator": "nope:x"}, "variants.translation.translator"),
        ({}, "variants.translation.languages: Field required"),
    ],
)
def test_bad_translation_settings_are_refused_naming_the_key(translation: dict, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        build_config("demo", {"variants": {"translation": translation}})
    assert words in str(err.value)


def test_every_translatable_language_is_one_py3langid_identifies() -> None:
    from sago_core.config import TRANSLATION_LANGUAGES
    from sago_core.variants.rewrite_checks import language_identifier  # loaded once

    labels = set(language_identifier().nb_classes)
    assert {c.split("_")[0] for c in TRANSLATION_LANGUAGES} <= labels
    assert len(TRANSLATION_LANGUAGES) >= 40


def test_the_dry_run_shows_translator_requests_the_cache_and_the_budget(tmp_path: Path) -> None:
    from sago_core.artifacts.layout import RunLayout
    from sago_core.backends.target import behaviour_key, run_targets
    from sago_core.config import ApiSettings, ApiSpending, VariantGrid
    from sago_core.run_plan import plan_run, render_plan, translator_target

    spec = "litellm:openai/gpt-4o-mini"
    grid = VariantGrid.model_validate(
        {"register": None, "noise": None, "structural": None, "replay": False}
    ).model_copy(update={"translation": settings(translator=spec)})
    config = RunConfig(
        models=("mock:m",),
        runs_dir=tmp_path,
        variants=grid,
        api=ApiSettings(spending=ApiSpending(max_requests=3)),
    )
    layout = RunLayout.of(config.runs_dir, config.resolved_run_id())
    targets = run_targets(config)
    plan = plan_run(config, PROMPTS, targets, layout, {})
    # 2 prompts x 2 languages: 4 translations and 4 round trips, 4 + up to 4 requests
    assert plan.translation is not None
    assert plan.translation.translated == plan.translation.round_trips == 4
    assert (plan.translation.forward, plan.translation.back, plan.translation.cached) == (4, 4, 0)
    assert plan.generations == {"mock:m": 2 + 4 + 4}
    (traffic,) = [t for t in plan.api if (t.spec, t.role) == (spec, "translator")]
    assert traffic.requests == 8 and traffic.requests_bounded
    assert traffic.output_token_ceiling == 8 * 128
    text = render_plan(plan, config)
    assert "  language         4 -> up to 4 (machine translations: usable and back-checked)" in (
        text
    )
    assert "  round_trip       4 -> up to 4 (semantic filter)" in text
    assert (
        f"  machine translation by {spec} into de, ja: 4 translations, 4 round trips (back "
        "into English)"
    ) in text
    assert (
        "  translator requests: 4 into the languages + up to 4 back into English; 0 already "
        "cached (translations and back-translations)"
    ) in text
    assert f"  {spec} (translator): up to 8 requests" in text
    assert (
        "Budget: api.spending.max_requests 3: the run would stop after 3 of up to 8 requests"
    ) in text

    target = translator_target(config, targets)
    assert target is not None
    cache = JsonCache(layout.cache.rewrites)
    backend = FakeBackend(translator)
    translate_prompts(PROMPTS, settings(), backend, behaviour_key(target), cache, 0, CHECK)
    cached = plan_run(config, PROMPTS, targets, layout, {})
    # 3 usable translations and their 3 back-translations are cached; p1's Japanese
    # answer (English) was not, so it and its back-translation are still to ask
    assert cached.translation is not None
    assert cached.translation.translated == cached.translation.round_trips == 4
    assert (cached.translation.forward, cached.translation.back, cached.translation.cached) == (
        1,
        1,
        6,
    )
    assert [t.requests for t in cached.api if (t.spec, t.role) == (spec, "translator")] == [2]


def test_the_task_writes_the_translated_candidates_through_a_named_backend(
    tmp_path: Path,
) -> None:
    from sago.tasks.prepare import translate_prompts_task
    from sago_core.artifacts.layout import TRANSLATED_CANDIDATES_FILE
    from sago_core.backends.target import model_target
    from sago_core.config import BertScoreSettings

    prompts = tmp_path / "prompts.parquet"
    PROMPTS.write_parquet(prompts)
    config = RunConfig(models=("mock:t",))
    target = model_target(config, "mock:t")
    common = {
        "prompts_path": str(prompts),
        "bertscore": BertScoreSettings(),
        "seed": 0,
        "cache_dir": str(tmp_path / "cache"),
        "out_dir": str(tmp_path / "stages"),
    }
    off = translate_prompts_task.fn(settings=None, translator=None, **common)
    assert Path(off) == tmp_path / "stages" / TRANSLATED_CANDIDATES_FILE
    assert pl.read_parquet(off).is_empty()
    # back-translations off: no scorer is loaded; the mock answers in English
    plain = settings(languages=["de"], round_trip=False, back_check=False)
    frame = pl.read_parquet(translate_prompts_task.fn(settings=plain, translator=target, **common))
    assert frame["variant_id"].to_list() == ["language:mt:de:100:global"] * 2
    assert frame["translator"].to_list() == ["mock:t"] * 2
    assert frame["reject_reason"].to_list() == ["translation is in en, not de (py3langid)"] * 2
