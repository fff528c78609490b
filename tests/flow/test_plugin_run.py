"""The example plug-in (tests/plugin_package, installed into the test environment by the
test targets, ``make test`` and ``make test-fast``) through ``sago run``: its ``echo`` backend
and ``emphasis`` family are in the dry-run plan, then in the run's variants, instances,
generations, tails and report."""

from __future__ import annotations

import json
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import polars as pl
import pytest
import yaml

pytestmark = pytest.mark.slow

QUESTIONS = ("What is the capital of France?", "Name a planet with rings.")


def _require_the_plugin() -> None:
    try:
        distribution("sago-example-plugin")
    except PackageNotFoundError:
        pytest.fail(
            "the example plug-in is not installed: `make test` and `make test-fast` install it "
            "(or: pip install --no-deps --no-build-isolation -e tests/plugin_package)"
        )


def _config_file(tmp_path: Path) -> Path:
    data = tmp_path / "questions.jsonl"
    data.write_text("".join(json.dumps({"question": q}) + "\n" for q in QUESTIONS))
    values = {
        "models": ["echo:x"],
        "datasets": [str(data)],
        "n": len(QUESTIONS),
        "runs_dir": str(tmp_path / "runs"),
        "generation": {"max_new_tokens": 12},
        # the plug-in's family alone (and the replay): 2 subtypes x 2 strengths, global
        "variants": {
            "register": None,
            "noise": None,
            "structural": None,
            "families": {"emphasis": {}},
        },
    }
    file = tmp_path / "plugin.yaml"
    file.write_text(yaml.safe_dump(values))
    return file


def _stressed(base: str, variant: str, subtype: str) -> int:
    """How many words ``variant`` stresses in ``base``; fails on any other change."""
    pairs = list(zip(base.split(" "), variant.split(" "), strict=True))
    stress = (lambda w: w.upper()) if subtype == "upper" else (lambda w: f"*{w}*")
    changed = [(b, v) for b, v in pairs if b != v]
    assert all(v == stress(b) for b, v in changed), (base, variant)
    return len(changed)


def test_the_plugins_backend_and_family_run_end_to_end(
    harness: None, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from sago_cli.main import main

    _require_the_plugin()

    file = _config_file(tmp_path)
    assert main(["run", "--config", str(file), "--dry-run"]) == 0
    plan = capsys.readouterr().out
    # every question's words hold lower-case letters: all 4 cells change each of the 2 prompts
    assert "emphasis         8 -> 8 (kept by construction)" in plan, plan
    assert "echo:x: 12 generations" in plan, plan  # 2 bases + 8 variants + 2 replays

    assert main(["run", "--config", str(file), "--run-id", "plugin"]) == 0
    run_dir = tmp_path / "runs" / "plugin"
    prompts = pl.read_parquet(run_dir / "prompts.parquet")
    base = dict(zip(prompts["prompt_id"], prompts["prompt"], strict=True))
    variants = pl.read_parquet(run_dir / "variants.parquet").filter(pl.col("family") == "emphasis")
    assert variants.height == 8 and variants["kept"].all()
    for row in variants.iter_rows(named=True):
        assert row["variant_id"] == f"emphasis:{row['subtype']}:{row['strength']:g}:global"
        stressed = _stressed(base[row["prompt_id"]], row["text"], row["subtype"])
        assert stressed == row["strength"]

    instances = pl.read_parquet(run_dir / "instances.parquet")
    assert instances.filter(pl.col("family") == "emphasis").height == 8
    generations = pl.read_parquet(run_dir / "generations.parquet")
    assert set(generations["model"]) == {"echo:x"}
    for row in generations.iter_rows(named=True):  # the echo backend answered every text
        assert row["response_text"] == f"You asked: {row['prompt_text']}", row
    assert generations.filter(pl.col("family") == "emphasis").height == 8
    assert "emphasis" in set(pl.read_parquet(run_dir / "tails.parquet")["family"])
    assert ">emphasis<" in (run_dir / "report.html").read_text(encoding="utf-8")
    manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["packages"]["sago-example-plugin"] == "0.1.0"
