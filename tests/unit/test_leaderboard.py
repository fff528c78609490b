"""The watch's leaderboard (sago_core/watch/leaderboard.py): releases link their cards, and a
release whose pooled paired verdict against its predecessor is b_worse is marked."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
from scipy import stats

from sago_core.report.card.build import write_card
from sago_core.scoring.summary import summarize
from sago_core.watch.leaderboard import write_leaderboard
from sago_core.watch.registry import Registry
from sago_core.watch.releases import previous_release
from tests.unit.test_compare import _run


def _release(runs: Path, name: str, factor: float) -> Path:
    weights = runs.parent / "releases" / name  # a model folder: its family is its architecture
    weights.mkdir(parents=True)
    config = {"model_type": "llama", "num_hidden_layers": 3, "hidden_size": 64, "vocab_size": 9}
    (weights / "config.json").write_text(json.dumps(config))
    folder = _run(runs / name, f"hf:{weights}", flip=False)
    scores = pl.read_parquet(folder / "scores.parquet").with_columns(pl.col("s") * factor)
    scores.write_parquet(folder / "scores.parquet")
    summarize(scores).write_parquet(folder / "summary.parquet")
    (folder / "run_config.json").write_text(json.dumps({"seed": 0, "variants": {}}))
    generations = pl.read_parquet(folder / "generations.parquet")  # a local model's engine
    generations.with_columns(pl.lit("{}").alias("engine")).write_parquet(
        folder / "generations.parquet"
    )
    prompts = pl.read_parquet(folder / "prompts.parquet")
    prompts.with_columns(pl.col("prompt_id").alias("prompt")).write_parquet(
        folder / "prompts.parquet"
    )
    return folder


def test_leaderboard_links_cards_and_marks_significant_regressions(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    registry = Registry(runs)
    old = _release(runs, "rel-1", 1.0)
    new = _release(runs, "rel-2", 3.0)  # every prompt's s three times as large
    registry.record(f"hf:{tmp_path}/releases/rel-1", "i1", old)
    previous = previous_release(registry.entries(), f"hf:{tmp_path}/releases/rel-2", "i2")
    assert previous is not None and previous.spec == f"hf:{tmp_path}/releases/rel-1"  # same family
    registry.record(f"hf:{tmp_path}/releases/rel-2", "i2", new)
    write_card(old, against_note="first release")
    write_card(new, Path(previous.run_dir))

    table, page = write_leaderboard(registry)
    board = pl.read_parquet(table)
    newer = board.filter(pl.col("model") == f"hf:{tmp_path}/releases/rel-2")
    assert set(newer["against"]) == {f"hf:{tmp_path}/releases/rel-1"}
    s_old = pl.read_parquet(old / "scores.parquet").filter(pl.col("axis") == "bleu")["s"]
    s_new = pl.read_parquet(new / "scores.parquet").filter(pl.col("axis") == "bleu")["s"]
    assert stats.ttest_rel(s_new.to_numpy(), s_old.to_numpy()).pvalue * 5 < 0.05
    bleu = newer.filter(pl.col("axis") == "bleu").row(0, named=True)
    assert bleu["paired_verdict"] == "b_worse" and bleu["regression"] is True
    assert (
        board.filter(pl.col("model") == f"hf:{tmp_path}/releases/rel-1")["regression"]
        .is_null()
        .all()
    )
    assert page is not None
    html = page.read_text()
    assert 'href="rel-2/card.html"' in html and 'href="rel-1/card.html"' in html
    assert "significant regression: " in html and "bleu" in html.split('id="releases"')[1]


def test_a_family_is_the_architecture_in_config_json(tmp_path: Path) -> None:
    from sago_core.watch.releases import model_family

    def folder(name: str, **config: object) -> str:
        path = tmp_path / name
        path.mkdir()
        (path / "config.json").write_text(json.dumps(config))
        return f"hf:{path}"

    small = {"model_type": "llama", "num_hidden_layers": 3, "hidden_size": 64, "vocab_size": 9}
    a, b = folder("a", **small), folder("b", **small, torch_dtype="float32")
    c = folder("c", **{**small, "num_hidden_layers": 4})
    assert model_family(a) == model_family(b) != model_family(c)
    assert model_family("litellm:openai/gpt-4o-mini") == "litellm:openai/gpt-4o-mini"


def test_a_model_known_by_name_only_is_its_own_family_and_identity() -> None:
    """A run scored from a file names its model as the file did (an API model's name,
    ``external``): no spec, never parsed as one; its family and identity are its name."""
    from sago_core.backends.model_source import RecordedModel
    from sago_core.watch.releases import identity_of, model_family

    for name in ("gemini-2.5-flash", "external", "openai:gpt-4o"):
        assert RecordedModel.of(name).spec is None
        assert model_family(name) == identity_of(name) == name
    recorded = RecordedModel.of("hf:smollm2-135m")
    assert recorded.spec is not None and recorded.local_id == "smollm2-135m"
    assert RecordedModel.of("litellm:openai/gpt-4o-mini").local_id is None
