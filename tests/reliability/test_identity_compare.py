"""A comparison across served-model identities is marked, or refused with --strict-identity.

Hand-built finished runs of one API model name whose answers (``engine`` JSON) report a
served model and a ``system_fingerprint``: the provider updated the model behind the alias
between run A and run B, or in the middle of one run. ``sago compare --paired``, ``sago
compare`` (the HTML page) and ``sago card --against`` say so prominently, naming both
identities; with ``--strict-identity`` they refuse and write nothing. Runs whose answers
agree, and runs with no recorded identity, are not marked.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from sago_cli.main import main
from tests.unit.test_card import _run as card_run
from tests.unit.test_card import _values
from tests.unit.test_compare import _run as compare_run

MODEL = "litellm:openai/gpt-x"
SERVED = "gpt-x-2026-06-13"


def _answers(run: Path, *identities: tuple[str, str, int]) -> Path:
    """generations.parquet of ``run``: per (served model, fingerprint, count) that many
    answers of MODEL, and one failed request (no answer, so no identity)."""
    engines, texts = [], []
    for served, fingerprint, count in identities:
        engine = {"backend": "litellm", "served_model": served, "system_fingerprint": fingerprint}
        engines += [json.dumps(engine)] * count
        texts += ["an answer"] * count
    engines.append(json.dumps({"backend": "litellm", "system_fingerprint": "fp_failed"}))
    texts.append(None)
    pl.DataFrame(
        {
            "model": [MODEL] * len(texts),
            "dataset": ["d1"] * len(texts),
            "prompt_id": [f"d1-{i}" for i in range(len(texts))],
            "variant_id": ["base"] * len(texts),
            "response_text": texts,
            "engine": engines,
        },
        schema_overrides={"response_text": pl.String},
    ).write_parquet(run / "generations.parquet")
    return run


def _card_runs(tmp_path: Path) -> tuple[Path, Path]:
    return card_run(tmp_path / "a", MODEL, _values(seed=1)), card_run(
        tmp_path / "b", MODEL, _values(seed=2)
    )


def test_paired_compare_marks_two_served_models_and_refuses_them_when_strict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = _card_runs(tmp_path)
    _answers(a, (SERVED, "fp_a", 8))
    _answers(b, (SERVED, "fp_b", 8))
    out = tmp_path / "cmp" / "paired.parquet"
    argv = ["compare", str(a), str(b), "--paired", "--out", str(out)]
    assert main(argv) == 0
    md = (out.parent / "paired.md").read_text()
    expected = (
        f"**WARNING: compares two different served models (system_fingerprint differ): "
        f"{MODEL} in A ({a}) answered as served_model {SERVED}, system_fingerprint fp_a "
        f"(8 answers); {MODEL} in B ({b}) answered as served_model {SERVED}, "
        "system_fingerprint fp_b (8 answers)**"
    )
    assert expected in md.splitlines()[:4]  # right under the title
    assert expected in capsys.readouterr().out

    strict = tmp_path / "strict" / "paired.parquet"
    assert main([*argv[:-1], str(strict), "--strict-identity"]) == 2
    error = capsys.readouterr().err
    assert "refusing to compare across served-model identities" in error
    assert "fp_a (8 answers)" in error and "fp_b (8 answers)" in error
    assert not strict.parent.exists()  # nothing written


def test_the_same_identity_is_not_marked_and_passes_strict(tmp_path: Path) -> None:
    a, b = _card_runs(tmp_path)
    _answers(a, (SERVED, "fp_a", 8))
    _answers(b, (SERVED, "fp_a", 6))
    out = tmp_path / "paired.parquet"
    argv = ["compare", str(a), str(b), "--paired", "--out", str(out), "--strict-identity"]
    assert main(argv) == 0
    assert "WARNING" not in (tmp_path / "paired.md").read_text()


def test_drift_inside_one_run_is_marked_with_both_identities(tmp_path: Path) -> None:
    a, b = _card_runs(tmp_path)
    _answers(a, (SERVED, "fp_a", 8))
    _answers(b, (SERVED, "fp_a", 5), ("gpt-x-2026-09-01", "fp_c", 3))  # moved mid-run
    out = tmp_path / "paired.parquet"
    assert main(["compare", str(a), str(b), "--paired", "--out", str(out)]) == 0
    warnings = [
        line for line in (tmp_path / "paired.md").read_text().splitlines() if "WARN" in line
    ]
    assert len(warnings) == 2
    assert "(served_model, system_fingerprint differ)" in warnings[0]
    assert warnings[1] == (
        f"**WARNING: B ({b}): {MODEL}: answered by 2 identities: served_model {SERVED}, "
        "system_fingerprint fp_a (5 answers); served_model gpt-x-2026-09-01, "
        "system_fingerprint fp_c (3 answers)**"
    )
    strict = ["compare", str(a), str(b), "--paired", "--out", str(out), "--strict-identity"]
    assert main(strict) == 2


def test_the_card_marks_the_previous_release_answered_by_another_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old, new = _card_runs(tmp_path)
    _answers(old, (SERVED, "fp_a", 8))
    _answers(new, (SERVED, "fp_b", 4), (SERVED, "fp_c", 4))
    assert main(["card", str(new), "--against", str(old)]) == 0
    card = json.loads((new / "card.json").read_text())
    (mismatch, drift) = card["paired"]["identity_warnings"]
    assert mismatch.startswith("compares two different served models (system_fingerprint")
    assert "fp_a (8 answers)" in mismatch and "fp_b (4 answers); " in mismatch
    assert drift.startswith(f"B ({new}): {MODEL}: answered by 2 identities")
    (model,) = card["models"]
    assert model["identity_drift"] == [
        f"this run: {MODEL}: answered by 2 identities: served_model {SERVED}, "
        f"system_fingerprint fp_b (4 answers); served_model {SERVED}, system_fingerprint "
        "fp_c (4 answers)"
    ]
    md = (new / "card.md").read_text()
    assert f"- WARNING: {mismatch}" in md and f"- WARNING: {model['identity_drift'][0]}" in md
    assert "WARNING: compares two different served models" in (new / "card.html").read_text()

    for name in ("card.md", "card.html", "card.json"):
        (new / name).unlink()
    assert main(["card", str(new), "--against", str(old), "--strict-identity"]) == 2
    assert "refusing to compare across served-model identities" in capsys.readouterr().err
    assert not (new / "card.json").exists()


def test_the_compare_page_marks_mixed_served_models(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _answers(compare_run(tmp_path / "run-a", MODEL, flip=False), (SERVED, "fp_a", 3))
    b = _answers(compare_run(tmp_path / "run-b", MODEL, flip=True), (SERVED, "fp_b", 3))
    local = compare_run(tmp_path / "run-c", MODEL, flip=True)  # no identity recorded
    out = tmp_path / "cmp.html"
    assert main(["compare", str(a), str(b), str(local), "--out", str(out)]) == 0
    page = out.read_text()
    assert "Warning: these results mix served models" in page
    assert (
        f"compares two different served models (system_fingerprint differ): {MODEL} in "
        f"run-a answered as served_model {SERVED}, system_fingerprint fp_a (3 answers); "
        f"{MODEL} in run-b answered as" in page
    )
    assert page.count("compares two different served models") == 1  # run-c: nothing to say
    assert "WARNING: compares two different served models" in capsys.readouterr().out
    strict = tmp_path / "strict.html"
    assert main(["compare", str(a), str(b), "--out", str(strict), "--strict-identity"]) == 2
    assert not strict.exists()
    assert main(["compare", str(a), str(local), "--out", str(strict), "--strict-identity"]) == 0
    assert "mix served models" not in strict.read_text()
