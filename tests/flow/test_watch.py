"""sago-watch over a local folder of models: a new model is evaluated exactly once, even by
overlapping watch runs; the registry, the leaderboard and the results site live in the
artifact store."""

from __future__ import annotations

import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import polars as pl
import pytest

from sago_core.vocabulary import AXES
from tests.unit.test_site import broken_links

pytestmark = pytest.mark.slow

OVERRIDES = {
    "n": 1,
    "generation": {"max_new_tokens": 4, "batch_size": 16},
    "variants": {
        "register": {"strengths": [2], "positions": ["suffix"]},
        "noise": {"spacing": [5], "punctuation": [3], "capitalization": [50]},
        "structural": None,
    },
}


def test_a_new_model_is_evaluated_once_even_by_overlapping_watch_runs(
    harness: None, tiny_model_dir: Path, tmp_path: Path
) -> None:
    from sago.flows.watch import watch
    from sago_core.backends.model_source import resolve_local_model
    from sago_core.checkpoints.series import quantize_series

    watched = tmp_path / "releases"
    watched.mkdir()
    shutil.copytree(tiny_model_dir, watched / "model-a")
    runs = str(tmp_path / "runs")

    first = watch(str(watched), runs_dir=runs, overrides=OVERRIDES)
    assert first == [f"hf:{(watched / 'model-a').resolve()}"]
    assert watch(str(watched), runs_dir=runs, overrides=OVERRIDES) == []  # nothing new

    # A new release appears; two watch runs overlap on it.
    quantize_series(resolve_local_model(str(tiny_model_dir)), [4], tmp_path / "q")
    shutil.copytree(tmp_path / "q" / "bits-04", watched / "model-b")
    with ThreadPoolExecutor(2) as pool:
        results = list(
            pool.map(lambda _: watch(str(watched), runs_dir=runs, overrides=OVERRIDES), range(2))
        )
    new = f"hf:{(watched / 'model-b').resolve()}"
    assert sorted(len(r) for r in results) == [0, 1] and new in results[0] + results[1]

    registry = pl.read_parquet(tmp_path / "runs" / "registry.parquet")
    assert registry.height == 2 and registry["spec"].n_unique() == 2
    board = pl.read_parquet(tmp_path / "runs" / "leaderboard.parquet")
    assert set(board["model"]) == set(registry["spec"]) and board.height == 2 * 6
    assert (tmp_path / "runs" / "leaderboard.html").read_text().count("<img") >= 1
    assert not list((tmp_path / "runs" / "registry").glob("*.claim"))  # claims released

    # Each release has its card; the second is compared with the first (same architecture).
    old_spec = first[0]
    assert board["family"].n_unique() == 1 and board["card"].is_not_null().all()
    run_of = dict(zip(registry["spec"], registry["run_dir"], strict=True))
    first_card = (Path(run_of[old_spec]) / "card.md").read_text()
    assert "first release of family arch:model_type=llama" in first_card
    card = json.loads((Path(run_of[new]) / "card.json").read_text())
    assert card["paired"]["against"] == run_of[old_spec]
    assert [r["axis"] for r in card["paired"]["rows"]] == list(AXES)
    newer = board.filter(pl.col("model") == new)
    assert set(newer["against"]) == {old_spec}
    verdicts = dict(zip(newer["axis"], newer["paired_verdict"], strict=True))
    assert verdicts == {r["axis"]: r["verdict"] for r in card["paired"]["rows"]}
    page = (tmp_path / "runs" / "leaderboard.html").read_text()
    assert page.count('/card.html">card</a>') == 2 and 'id="releases"' in page

    # The results site was rebuilt after the releases: one family, both runs, no dead link.
    site = tmp_path / "runs" / "site"
    front = (site / "index.html").read_text()
    assert front.count("Plotly.newPlot") == 1
    for run_dir in registry["run_dir"]:
        assert f'href="runs/{Path(run_dir).name}/index.html"' in front
        assert (site / "runs" / Path(run_dir).name / "card.html").is_file()
    assert broken_links(site) == []
