"""Saved runs stay readable: two run folders written by sago before its command line was
regrouped and its words renamed (``tests/fixtures/runs_before_renames``, made with the
``mock:`` backend on the built-in prompts, n = 3, report.html and Prefect's result cache
left out) still report, compare, card, export and resume with today's code.

The folders are kept as they were written, absolute paths of the machine that wrote them
included: a run folder that moved is a real case."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest

pytestmark = pytest.mark.slow

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "runs_before_renames"


@pytest.fixture()
def runs(tmp_path: Path) -> Path:
    target = tmp_path / "runs"
    shutil.copytree(FIXTURE, target)
    return target


def test_a_saved_run_reports_compares_cards_and_exports(runs: Path, tmp_path: Path) -> None:
    from sago_cli.main import main
    from sago_core.vocabulary import POOLED

    a, b = runs / "legacy-a", runs / "legacy-b"
    assert not (a / "report.html").exists()
    assert main(["report", str(a)]) == 0
    page = (a / "report.html").read_text(encoding="utf-8")
    assert "mock:release-a" in page

    paired = tmp_path / "paired.parquet"
    assert main(["compare", "paired", str(a), str(b), "--out", str(paired)]) == 0
    table = pl.read_parquet(paired)
    summary = pl.read_parquet(a / "summary.parquet")
    # Every (dataset, axis) of the saved summary is compared.
    assert set(zip(table["dataset"], table["axis"], strict=True)) >= {
        (d, x) for d, x in zip(summary["dataset"], summary["axis"], strict=True) if d != POOLED
    }

    assert main(["card", str(b), "--against", str(a)]) == 0
    assert list(b.glob("card*"))

    exported = tmp_path / "answers.jsonl"
    assert main(["export", "generations", str(a), "--out", str(exported)]) == 0
    lines = exported.read_text(encoding="utf-8").splitlines()
    assert len(lines) == pl.read_parquet(a / "generations.parquet").height


def test_a_saved_run_that_lost_a_shard_resumes(harness: None, runs: Path) -> None:
    from sago_cli.main import main
    from sago_core.vocabulary import POOLED

    a = runs / "legacy-a"
    shard = sorted(a.glob("models/*/shards/*/generations.parquet"))[0]
    shard.unlink()
    (a / "summary.parquet").unlink()
    assert main(["resume", str(a)]) == 0
    assert shard.is_file()
    summary = pl.read_parquet(a / "summary.parquet")
    assert set(summary["axis"]) == {"act", "bleu", "bert", "prob", "ent", "mr"}
    assert summary.filter(pl.col("dataset") != POOLED)["dataset"].n_unique() == 6
