"""The instance explorer's embedded data, read back without a browser: every variant once,
in one compact blob whose codes, texts and numbers give back the instances."""

from __future__ import annotations

import base64
import gzip
import json
import random
import re

import polars as pl

from sago_core.report.sections.explorer import explorer_rows, explorer_section, worst_rows
from sago_core.stages.instances import build_instances
from tests.unit.test_tails import raw_run

N = 10_000
# strengths in the order a row gets them (row i: STRENGTHS[i % 8]); numerically sorted they
# read -4, -2, 1, 2, 4, 10, 25, 75 (as text they would read -2, -4, 1, 10, 2, 25, 4, 75)
STRENGTHS = [75.0, -2.0, 10.0, 1.0, -4.0, 25.0, 2.0, 4.0]
NUMERIC_ORDER = ["-4", "-2", "1", "2", "4", "10", "25", "75"]
SUBTYPES = 7  # row i: sub{i % 7}; sub0..sub3 hold 1429 rows, sub4..sub6 1428
LANGUAGES = ["en", "de", "ja"]  # row i: LANGUAGES[i % 3]
VARIANTS_PER_PROMPT = 80
LONG_MODEL = "org/an-unusually-long-model-name-that-must-wrap-" + "x" * 40
UNBROKEN = "https://example.org/" + "a" * 400  # one word no cell can fit on a line


def _words(rng: random.Random, count: int) -> str:
    return " ".join(f"w{rng.randrange(3000)}" for _ in range(count))


def synthetic_instances(n: int = N, language: bool = True) -> pl.DataFrame:
    """An instances table of ``n`` variants with known numbers: d_act = ((37 i) mod 1000 -
    500) / 1000 (never null), d_bleu = ((53 i) mod 2001 - 1000) / 100 (null when i mod 10 is
    0), texts of paper-like length (prompts ~40 words, answers ~70). The first 8 rows form
    dataset "tiny", one row per strength."""
    rng = random.Random(0)
    prompts = {p: _words(rng, 40) for p in range(n // VARIANTS_PER_PROMPT + 1)}
    base_answers = {p: _words(rng, 70) for p in prompts}
    rows = []
    for i in range(n):
        p = i // VARIANTS_PER_PROMPT
        rows.append(
            {
                "model": LONG_MODEL if i % 2 else "org/small",
                "dataset": "tiny" if i < 8 else f"ds{i % 5}",
                "prompt_id": f"p{p}",
                "variant_id": f"v{i}",
                "family": f"fam{i % 4}",
                "subtype": f"sub{i % SUBTYPES}",
                "strength": STRENGTHS[i % 8],
                "position": "prefix" if i % 3 == 0 else "suffix",
                **({"language": LANGUAGES[i % 3]} if language else {}),
                "base_prompt": prompts[p],
                "variant_prompt": f"Please answer: {prompts[p]} ({i % 9})",
                "base_answer": base_answers[p],
                "variant_answer": UNBROKEN if i == 1 else _words(rng, 70),
                "d_act": ((37 * i) % 1000 - 500) / 1000,
                "d_bleu": None if i % 10 == 0 else ((53 * i) % 2001 - 1000) / 100,
                "d_bert": (i % 13) / 13,
                "d_prob": -(i % 17) / 17,
                "d_ent": (i % 19) / 19 - 0.5,
                "d_mr": float(i % 2),
                "mr_intensity": (i % 11) / 10,
            }
        )
    return pl.DataFrame(rows)


def _blob(page: str) -> dict:
    found = re.search(r'<script type="text/plain" id="explorer-data">([^<]*)</script>', page)
    assert found, "no explorer data in the page"
    return json.loads(gzip.decompress(base64.b64decode(found.group(1))))


def test_every_variant_is_embedded_once_and_reads_back() -> None:
    instances = synthetic_instances(2_000)
    data = _blob(explorer_section(instances))
    assert data["n"] == 2_000
    assert data["cats"]["strength"] == NUMERIC_ORDER
    assert data["cats"]["subtype"] == [f"sub{k}" for k in range(SUBTYPES)]
    assert data["cats"]["language"] == ["de", "en", "ja"]
    for i in (0, 1, 7, 1234, 1999):
        for column in ("model", "dataset", "family", "subtype", "position", "language"):
            assert data["cats"][column][data["codes"][column][i]] == instances[column][i]
        strength = data["cats"]["strength"][data["codes"]["strength"][i]]
        assert float(strength) == STRENGTHS[i % 8]
        for column in ("base_prompt", "variant_prompt", "base_answer", "variant_answer"):
            assert data["strings"][data["texts"][column][i]] == instances[column][i]
        assert abs(data["nums"]["d_act"][i] - ((37 * i) % 1000 - 500) / 1000) < 1e-9
    assert data["nums"]["d_bleu"][0] is None and data["nums"]["d_bleu"][10] is None
    # a base prompt and its answer are stored once for its 80 variants
    prompts = 2_000 // VARIANTS_PER_PROMPT
    assert len(data["strings"]) <= 2 * prompts + 2 * 2_000


def test_ten_thousand_variants_stay_small() -> None:
    instances = synthetic_instances()
    page = explorer_section(instances)
    own = sum(len(p) + len(a) for p, a in instances[["variant_prompt", "variant_answer"]].rows())
    print(
        f"explorer section: {len(page) / 1e6:.2f} MB for {N} variants ({own / 1e6:.2f} MB of "
        "their own prompts and answers)"
    )
    # smaller than the variants' own texts, though it holds them, the base texts and numbers
    assert len(page) < 0.4 * own
    assert "w1 " not in page  # no text inlined as markup: it lives in the blob only


def test_the_language_filter_appears_only_with_a_language_column() -> None:
    with_language = explorer_section(synthetic_instances(200))
    without = explorer_section(synthetic_instances(200, language=False))
    assert 'id="explorer-language"' in with_language
    assert 'id="explorer-language"' not in without
    assert "language" not in _blob(without)["cats"]
    for page in (with_language, without):
        assert 'id="explorer-subtype"' in page
        options = re.search(r'<select id="explorer-strength">(.*?)</select>', page)
        assert options
        assert re.findall(r'value="([^"]*)"', options.group(1)) == ["__any__", *NUMERIC_ORDER]


def test_beyond_the_cap_the_page_embeds_the_worst_variants() -> None:
    raw = raw_run(prompts=4)
    instances = build_instances(raw["deltas"], raw["generations"], raw["prompts"])
    everything = explorer_section(instances)
    assert _blob(everything)["n"] == len(instances)
    assert f"All {len(instances)} variants" in everything
    capped = explorer_rows(instances, max_rows=len(instances) - 1)
    assert len(capped) == len(worst_rows(instances)) < len(instances)


def test_nothing_to_explore_without_a_measured_delta() -> None:
    instances = synthetic_instances(20).with_columns(
        pl.lit(None, pl.Float64).alias(f"d_{a}")
        for a in ("act", "bleu", "bert", "prob", "ent", "mr")
    )
    assert "nothing to explore" in explorer_section(instances)


def test_the_language_filter_is_derived_from_language_variants() -> None:
    """A real instances frame has no ``language`` column: a language variant's subtype is
    its language, every other row is in English."""
    instances = synthetic_instances(200, language=False).with_columns(
        pl.when(pl.int_range(pl.len()) % 4 == 0)
        .then(pl.lit("language"))
        .otherwise(pl.col("family"))
        .alias("family"),
        pl.when(pl.int_range(pl.len()) % 4 == 0)
        .then(pl.lit("de"))
        .otherwise(pl.col("subtype"))
        .alias("subtype"),
    )
    page = explorer_section(instances)
    assert 'id="explorer-language"' in page
    data = _blob(page)
    assert data["cats"]["language"] == ["de", "en"]
    codes = data["codes"]["language"]
    # rows 0, 4, 8, ... are the German variants (50 of 200), the others English
    assert [data["cats"]["language"][c] for c in codes[:5]] == ["de", "en", "en", "en", "de"]
    assert codes.count(data["cats"]["language"].index("de")) == 50
