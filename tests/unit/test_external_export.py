"""`sago export`: a run's generations in the input schema, read back unchanged by `sago
score`'s reader in each file format (.csv, .jsonl, .parquet)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from sago_core.artifacts.schemas import GENERATIONS, PROMPTS
from sago_core.artifacts.store import write_parquet
from sago_core.errors import InputError
from sago_core.external.export import export_run
from sago_core.external.options import ExternalSource
from sago_core.external.read import read_external
from sago_core.external.schema import EMPTY_RESPONSE

ROWS = [
    # variant_id, family, subtype, strength, position, prompt, response, ids, failure
    ("base", None, None, None, None, "Why is the sky blue?", "Rayleigh, \"mostly\".",
     [5, 6, 2], None),
    ("noise:spacing:5:global", "noise", "spacing", 5.0, "global", "Why  is the sky  blue? ",
     "Rayleigh\nscattering.", [5, 7, 2], None),
    ("register:-2:suffix", "register", "politeness", -2.0, "suffix", "Why is the sky blue? Now.",
     None, None, "rate_limited"),
    ("replay:base:0:global", "replay", "base", 0.0, "global", "Why is the sky blue?",
     "Rayleigh, \"mostly\".", [5, 6, 2], None),
    # a tiny model's empty answer: generated, accepted by the run, scored as ""
    ("noise:spacing:9:global", "noise", "spacing", 9.0, "global", "Why  is  the sky  blue?",
     "", [2], None),
]  # fmt: skip


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "run"
    records = [
        {
            "model": "hf:smollm2-135m",
            "dataset": "builtin_truthfulqa",
            "prompt_id": "q1",
            "variant_id": v,
            "family": f,
            "subtype": s,
            "strength": st,
            "position": pos,
            "prompt_text": prompt,
            "response_text": response,
            "answer_text": response,
            "response_token_ids": ids,
            "finish_reason": "failed" if failure else "stop",
            "failure_reason": failure,
            "engine": "{}",
        }
        for v, f, s, st, pos, prompt, response, ids, failure in ROWS
    ]
    generations = pl.DataFrame(records, schema=GENERATIONS)
    write_parquet(generations, folder / "generations.parquet", GENERATIONS)
    prompts = pl.DataFrame(
        [
            {
                "dataset": "builtin_truthfulqa",
                "prompt_id": "q1",
                "prompt": "Why is the sky blue?",
                "references": ["Rayleigh scattering", "light, scattered"],
                "source": "builtin",
            }
        ],
        schema=PROMPTS,
    )
    write_parquet(prompts, folder / "prompts.parquet", PROMPTS)
    return folder


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_export_reads_back_as_the_run_wrote_it(run_dir: Path, tmp_path: Path, suffix: str) -> None:
    out = export_run(run_dir, tmp_path / f"export{suffix}")
    table = read_external(ExternalSource(path=out))
    assert table.format == "generations"
    got = [
        (
            r.variant_id,
            r.variant.family if r.variant else None,
            r.variant.subtype if r.variant else None,
            r.variant.strength if r.variant else None,
            r.variant.position if r.variant else None,
            r.prompt_text,
            r.response_text,
            list(r.response_token_ids) if r.response_token_ids is not None else None,
        )
        for r in table.rows
    ]
    assert got == [row[:8] for row in ROWS]
    assert {r.model for r in table.rows} == {"hf:smollm2-135m"}
    assert table.rows[0].references == ("Rayleigh scattering", "light, scattered")
    failed = table.rows[2]  # failed in the run: failed with the run's reason
    assert failed.failure_reason == "rate_limited" and failed.response_text is None
    empty = table.rows[4]  # answered "" in the run: an empty answer, not a failure
    assert empty.response_text == "" and empty.failure_reason is None
    assert EMPTY_RESPONSE not in {r.failure_reason for r in table.rows}


def test_csv_lists_are_json_arrays(run_dir: Path, tmp_path: Path) -> None:
    out = export_run(run_dir, tmp_path / "export.csv")
    first = pl.read_csv(out).row(0, named=True)
    assert json.loads(first["response_token_ids"]) == [5, 6, 2]
    assert json.loads(first["references"]) == ["Rayleigh scattering", "light, scattered"]


def test_export_of_a_folder_that_is_no_run_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a finished run"):
        export_run(tmp_path, tmp_path / "x.csv")
    with pytest.raises(InputError, match="unsupported export type"):
        from sago_core.external.export import write_export

        write_export(pl.DataFrame(), tmp_path / "x.xlsx")


def test_cli_export_to_a_file_beside_the_folder_format(run_dir: Path, tmp_path: Path) -> None:
    from sago_cli.main import main

    out = tmp_path / "export.jsonl"
    assert main(["export", str(run_dir), "--out", str(out)]) == 0  # no --format: by suffix
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(ROWS)
    assert json.loads(lines[1])["variant_id"] == "noise:spacing:5:global"
