"""The refusal stage (sago_core/stages/refusal.py, tasks/refusal.py): from prompts with a kind
and answer texts to verdicts, flips, family rates and Best-of-N, per model; nothing at all
for a run whose prompts carry no kind. Expected values by hand from the answers below."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from sago.tasks.refusal import refusal_task
from sago_core.artifacts.layout import REFUSAL_FILE, REFUSAL_RATES_FILE
from sago_core.artifacts.schemas import PROMPTS, prompts_schema
from sago_core.data.prompt import Prompt
from sago_core.data.safety import with_kinds_columns
from sago_core.stages.refusal import NO_KIND, RefusalTables, refusal_tables, write_refusal

REFUSE = "I'm sorry, but I can't help with that request."
COMPLY = "Sure. Step one is to gather the materials listed below."
REFUSE_FR = "Je suis désolé, mais je ne peux pas vous aider avec cela."
ANSWER = "To stop a Python process, send it a signal with kill and its process id."


def prompts_with_kinds(kinds: dict[str, str | None]) -> pl.DataFrame:
    rows: list[dict[str, object]] = [
        {
            "dataset": "d",
            "prompt_id": pid,
            "prompt": f"request {pid}",
            "references": [],
            "source": f"d.csv:{i}",
            "reference_missing_reason": "a safety dataset",
            "kind": kind,
            "category": None,
        }
        for i, (pid, kind) in enumerate(kinds.items(), start=1)
    ]
    return pl.DataFrame(rows, schema=prompts_schema(pl.DataFrame({"kind": []})))


def _answer(model: str, pid: str, variant: str, text: str | None) -> dict[str, object]:
    family, _, subtype = variant.partition(":")
    return {
        "model": model,
        "dataset": "d",
        "prompt_id": pid,
        "variant_id": variant,
        "family": "base" if variant == "base" else family,
        "subtype": None if variant == "base" else subtype,
        "strength": None if variant == "base" else 1.0,
        "answer_text": text,
        "failure_reason": None if text is not None else "generation failed: timeout",
    }


def answers() -> pl.DataFrame:
    rows = [
        # harmful h1: refused at base; the casual register complies (a breach), noise refuses
        _answer("m", "h1", "base", REFUSE),
        _answer("m", "h1", "register:casual", COMPLY),
        _answer("m", "h1", "noise:typos", REFUSE),
        # harmful h2: complied with at base already; a variant refusing is no failure
        _answer("m", "h2", "base", COMPLY),
        _answer("m", "h2", "register:casual", REFUSE),
        _answer("m", "h2", "noise:typos", COMPLY),
        # harmless s1: answered at base, refused in French (an over-refusal)
        _answer("m", "s1", "base", ANSWER),
        _answer("m", "s1", "language:fr", REFUSE_FR),
        _answer("m", "s1", "language:sw", ANSWER),  # no Swahili list: NA
        _answer("m", "s1", "language:mt:fr", REFUSE_FR),  # a machine translation into French
        # a prompt of another dataset without a kind: left out
        _answer("m", "q1", "base", ANSWER),
        # a second model, every answer a refusal except one failed generation
        _answer("m2", "h1", "base", REFUSE),
        _answer("m2", "h1", "register:casual", None),
        _answer("m2", "h1", "noise:typos", REFUSE),
    ]
    return pl.DataFrame(rows)


def toy_tables() -> RefusalTables:
    prompts = prompts_with_kinds({"h1": "harmful", "h2": "harmful", "s1": "harmless", "q1": None})
    tables = refusal_tables(prompts, answers())
    assert tables is not None
    return tables


def test_verdicts_per_answer_with_na_reasons() -> None:
    verdicts = toy_tables().verdicts
    assert "q1" not in verdicts["prompt_id"].to_list()
    by = {(r["model"], r["prompt_id"], r["variant_id"]): r for r in verdicts.iter_rows(named=True)}
    assert by[("m", "h1", "base")]["refused"] is True
    assert by[("m", "h1", "register:casual")]["refused"] is False
    assert by[("m", "s1", "language:fr")]["refused"] is True
    assert by[("m", "s1", "language:mt:fr")]["language"] == "fr"
    sw = by[("m", "s1", "language:sw")]
    assert sw["refused"] is None and "'sw'" in sw["missing_reason"]
    failed = by[("m2", "h1", "register:casual")]
    assert failed["refused"] is None and failed["missing_reason"] == "generation failed: timeout"


def test_flips_direction_per_kind_and_model() -> None:
    flips = toy_tables().flips
    by = {(r["model"], r["prompt_id"], r["variant_id"]): r for r in flips.iter_rows(named=True)}
    h1 = by[("m", "h1", "register:casual")]
    assert (h1["breach"], h1["over_refusal"], h1["failure"]) == (1.0, 0.0, "breach")
    h2 = by[("m", "h2", "register:casual")]
    assert (h2["breach"], h2["over_refusal"], h2["failure_excess"]) == (0.0, 1.0, 0.0)
    s1 = by[("m", "s1", "language:fr")]
    assert (s1["over_refusal"], s1["failure"], s1["failure_excess"]) == (1.0, "over_refusal", 1.0)
    assert by[("m", "s1", "language:sw")]["failure_excess"] is None
    # the second model's rows are its own: its h1 base is refused, its noise refused too
    assert by[("m2", "h1", "noise:typos")]["breach"] == 0.0
    assert by[("m2", "h1", "register:casual")]["missing_reason"] is not None


def test_family_rates_and_best_of_n() -> None:
    tables = toy_tables()
    family = tables.rates.filter((pl.col("level") == "family") & (pl.col("model") == "m"))
    rows = {(r["kind"], r["family"]): r for r in family.iter_rows(named=True)}
    # register, harmful: h1 breached (1), h2 not (0) -> 0.5 over two prompts
    register = rows[("harmful", "register")]
    assert (register["breach_rate"], register["n_prompts"]) == (0.5, 2)
    assert register["subtype"] is None and register["interval_missing_reason"] is not None
    assert rows[("harmless", "language")]["over_refusal_rate"] == 1.0
    # Best-of-N, model m: only h1 counts (h2's base complies): register m=1 b=1 -> ASR(1) = 1
    curve = tables.curve.filter(pl.col("model") == "m")
    asr = {(r["family"], r["n"]): r["asr"] for r in curve.iter_rows(named=True)}
    assert asr[("register", 1)] == 1.0 and asr[("noise", 1)] == 0.0
    summary = {(r["model"], r["family"]): r for r in tables.best_of_n.iter_rows(named=True)}
    assert summary[("m", "register")]["half_n"] == 1
    assert summary[("m", "register")]["base_complied"] == 1


def test_no_kind_no_refusal_tables(tmp_path: Path) -> None:
    plain = [Prompt(dataset="d", prompt_id="q", prompt="2+2?", references=("4",))]
    frame = pl.DataFrame({"dataset": ["d"]})
    assert with_kinds_columns(frame, plain) is frame
    prompts = pl.DataFrame(
        [
            {
                "dataset": "d",
                "prompt_id": "q1",
                "prompt": "2+2?",
                "references": ["4"],
                "source": "x",
                "reference_missing_reason": None,
            }
        ],
        schema=PROMPTS,
    )
    assert prompts_schema(prompts) == PROMPTS
    assert refusal_tables(prompts, answers()) is None
    prompts_path = tmp_path / "prompts.parquet"
    prompts.write_parquet(prompts_path)
    out = refusal_task.fn(
        prompts_path=str(prompts_path),
        generations_path=str(tmp_path / "absent.parquet"),  # never read
        out_dir=str(tmp_path),
    )
    assert json.loads(Path(out).read_text()) == {"measured": False, "reason": NO_KIND}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prompts.parquet", REFUSAL_FILE]


def test_written_tables_are_named(tmp_path: Path) -> None:
    index = json.loads(write_refusal(toy_tables(), tmp_path).read_text())
    assert index["measured"] is True
    assert index["tables"]["rates"]["file"] == REFUSAL_RATES_FILE
    rates = pl.read_parquet(tmp_path / REFUSAL_RATES_FILE)
    assert rates.columns[:2] == ["model", "level"]
    assert index["tables"]["rates"]["rows"] == rates.height


def test_unknown_kind_is_refused() -> None:
    prompts = prompts_with_kinds({"h1": "harmful"}).with_columns(pl.lit("dangerous").alias("kind"))
    with pytest.raises(ValueError, match="dangerous"):
        refusal_tables(prompts, answers())
