"""Variant builders: exact noise counts and positions, '?' never inserted, ladders monotone."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sago_core.config import RegisterGrid, VariantGrid
from sago_core.data.builtin import builtin_prompts
from sago_core.variants import build_variants
from sago_core.variants.noise import (
    PUNCTUATION_MARKS,
    add_punctuation,
    add_spaces,
    capitalize_share,
    region,
)
from sago_core.variants.register import (
    POLITE_PREFIX,
    POLITE_SUFFIX,
    RUDE_PREFIX,
    RUDE_SUFFIX,
    apply_register,
)

PROMPT = "Which composer wrote the Moonlight Sonata in the year eighteen hundred and one?"
words = st.text(alphabet="abcdefghij XYZ", min_size=1, max_size=80).filter(lambda t: t.strip())


def _marks(text: str) -> int:
    return sum(text.count(m) for m in PUNCTUATION_MARKS)


@pytest.mark.parametrize("count", [1, 5, 20, 50, 100])
@pytest.mark.parametrize("position", ["prefix", "suffix", "global"])
def test_spacing_adds_exactly_count_spaces_inside_the_region(count: int, position: str) -> None:
    out = add_spaces(PROMPT, count, position, random.Random(7))
    assert len(out) == len(PROMPT) + count
    assert out.replace(" ", "") == PROMPT.replace(" ", "")
    assert out.split() == PROMPT.split()  # no word is split
    start, end = region(PROMPT, position)
    if position == "prefix":
        assert out.endswith(PROMPT[end:])
    if position == "suffix":
        assert out.startswith(PROMPT[: start + 1].rsplit(" ", 1)[0])


@pytest.mark.parametrize("count", [1, 3, 5, 10, 20])
@pytest.mark.parametrize("position", ["prefix", "suffix", "global"])
def test_punctuation_adds_exactly_count_marks_never_a_question_mark(
    count: int, position: str
) -> None:
    out = add_punctuation(PROMPT, count, position, random.Random(3))
    assert len(out) == len(PROMPT) + count
    assert _marks(out) - _marks(PROMPT) == count
    assert out.count("?") == PROMPT.count("?")
    stripped = "".join(ch for ch in out if ch not in PUNCTUATION_MARKS)
    assert stripped == "".join(ch for ch in PROMPT if ch not in PUNCTUATION_MARKS)


@pytest.mark.parametrize("percent", [10, 25, 50, 75, 100])
@pytest.mark.parametrize("position", ["prefix", "suffix", "global"])
def test_capitalization_share_within_rounding(percent: int, position: str) -> None:
    text = PROMPT.lower()
    out = capitalize_share(text, percent, position, random.Random(11))
    start, end = region(text, position)
    letters = [i for i in range(start, end) if text[i].isalpha()]
    upper = sum(1 for i in letters if out[i].isupper())
    assert upper == round(len(letters) * percent / 100)
    assert out[:start] == text[:start] and out[end:] == text[end:]
    assert out.lower() == text


def test_prefix_and_suffix_noise_touch_only_their_half() -> None:
    _start, end = region(PROMPT, "prefix")
    prefixed = add_punctuation(PROMPT, 10, "prefix", random.Random(1))
    assert prefixed.endswith(PROMPT[end:])
    suffixed = add_punctuation(PROMPT, 10, "suffix", random.Random(1))
    middle = region(PROMPT, "suffix")[0]
    assert suffixed.startswith(PROMPT[:middle])


@given(text=words, count=st.integers(1, 30), seed=st.integers(0, 2**32))
@settings(max_examples=60, deadline=None)
def test_noise_properties_hold_for_any_text(text: str, count: int, seed: int) -> None:
    for position in ("prefix", "suffix", "global"):
        spaced = add_spaces(text, count, position, random.Random(seed))
        assert len(spaced) == len(text) + count and spaced.split() == text.split()
        marked = add_punctuation(text, count, position, random.Random(seed))
        assert _marks(marked) - _marks(text) == count and "?" not in marked


@pytest.mark.parametrize(
    ("sign", "before", "after"), [(1, POLITE_PREFIX, POLITE_SUFFIX), (-1, RUDE_PREFIX, RUDE_SUFFIX)]
)
@pytest.mark.parametrize("position", ["prefix", "suffix", "global"])
def test_register_ladders_are_cumulative_and_monotone(
    sign: int, before: tuple[str, ...], after: tuple[str, ...], position: str
) -> None:
    texts = [apply_register(PROMPT, sign * level, position) for level in (2, 4, 6, 8, 10)]
    assert all(len(a) < len(b) for a, b in itertools.pairwise(texts))
    markers = [sum(t.count(p) for p in before + after) for t in texts]
    assert all(a <= b for a, b in itertools.pairwise(markers))
    assert markers[-1] > markers[0]
    for weaker, stronger in itertools.pairwise(texts):
        for piece in before + after:
            if piece in weaker:
                assert piece in stronger
    for text in texts:
        assert "  " not in text and "’" not in text


def test_register_global_rewrites_inside_the_sentence() -> None:
    text = apply_register(PROMPT, 4, "global")
    assert "Which, if I may kindly ask, composer" in text
    assert apply_register(PROMPT, -4, "global").count("for crying out loud") == 1


@pytest.mark.parametrize("bad", [0, 3, 12, -11])
def test_register_rejects_levels_outside_the_ladder(bad: int) -> None:
    with pytest.raises(ValueError):
        apply_register(PROMPT, bad, "prefix")


def test_variants_do_not_depend_on_order_and_have_readable_stable_ids() -> None:
    prompts = builtin_prompts()
    grid = VariantGrid()
    forward = {(v.prompt_id, v.variant_id): v.text for v in build_variants(prompts, grid, 5)}
    shuffled = prompts[::-1]
    backward = {(v.prompt_id, v.variant_id): v.text for v in build_variants(shuffled, grid, 5)}
    assert forward == backward
    other_seed = {(v.prompt_id, v.variant_id): v.text for v in build_variants(prompts, grid, 6)}
    assert other_seed != forward
    ids = {vid for _, vid in forward}
    assert "register:+6:prefix" in ids and "noise:spacing:20:global" in ids
    # full spec grid: 10 register levels x 3 positions + 3 noise subtypes x 5 x 3 positions,
    # plus the replay (the base text again, for the noise floor)
    one = build_variants(prompts[:1], grid, 0)
    assert len(one) == 30 + 45 + 1
    replay = [v for v in one if v.family == "replay"]
    assert len(replay) == 1 and replay[0].text == prompts[0].prompt


def test_grid_selection_limits_the_variants() -> None:
    grid = VariantGrid.model_validate(
        {
            "register": RegisterGrid(strengths=(-2, 2), positions=("suffix",)),
            "noise": None,
            "replay": False,
        }
    )
    variants = build_variants(builtin_prompts()[:2], grid, 0)
    assert sorted({v.variant_id for v in variants}) == ["register:+2:suffix", "register:-2:suffix"]
