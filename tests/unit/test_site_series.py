"""The results site draws one trend line only over runs ``sago compare --paired`` would
pair: one model's runs of other settings or other prompts are lines of their
own with the refusal's reason, and a line is ordered by the runs' start (or a date in the
release's name), never by when a manifest was last written or touched."""

from __future__ import annotations

import json
import os
from pathlib import Path

import polars as pl

from sago_core.site.build import build_site
from sago_core.site.collect import read_site
from sago_core.site.trends import release_label, trend_figure
from tests.unit.test_site import CONFIG, _run

SPEC = "hf:smollm2-135m"
IDENTITY = "sha256:b179c95d0e"
ENCODER = {"model": "minilm-l6", "num_layers": 6}
BASE = {**CONFIG, "bertscore": ENCODER}
DEMO = {**BASE, "generation": {"max_new_tokens": 40}}
SHORT = {**BASE, "generation": {"max_new_tokens": 8}}
SAMPLED = {**BASE, "generation": {"max_new_tokens": 40, "temperature": 0.7, "samples": 4}}
RESCALED = {**DEMO, "bertscore": {**ENCODER, "rescale_with_baseline": True}}


def _one(root: Path, run_id: str, started: str, config: dict, prompts: int = 3) -> Path:
    return _run(root, run_id, {SPEC: (IDENTITY, {"act": 0.1})}, config, prompts, started)


def mixed_designs(root: Path) -> Path:
    """One model, five runs; run ids sort against their start times."""
    _one(root, "e-first", "2026-11-01T09:00:00+00:00", DEMO)
    _one(root, "d-second", "2026-11-02T09:00:00+00:00", DEMO)
    _one(root, "c-short", "2026-11-03T09:00:00+00:00", SHORT, prompts=2)
    _one(root, "b-fewer", "2026-11-04T09:00:00+00:00", DEMO, prompts=2)
    _one(root, "a-sampled", "2026-11-05T09:00:00+00:00", SAMPLED)
    _one(root, "0-rescaled", "2026-11-06T09:00:00+00:00", RESCALED)
    return root


def _lines(root: Path) -> list[tuple[list[str], str, str | None]]:
    site = read_site(root)
    return [([r.run_id for r in s.releases], s.basis, s.apart) for s in site.series]


def test_a_line_joins_only_runs_of_one_design_in_the_order_they_started(tmp_path: Path) -> None:
    root = mixed_designs(tmp_path / "runs")
    lines = _lines(root)
    assert [ids for ids, _, _ in lines] == [
        ["e-first", "d-second"],
        ["c-short"],
        ["b-fewer"],
        ["a-sampled"],
        ["0-rescaled"],
    ]
    assert {basis for _, basis, _ in lines} == {"started"}
    reasons = [apart for _, _, apart in lines]
    assert reasons[0] is None
    assert "generation.max_new_tokens (decoding): 40 vs 8" in str(reasons[1])
    assert "not measured on the same prompts" in str(reasons[2])
    assert "toy/p2" in str(reasons[2])
    assert "sampled differently" in str(reasons[3]) and "temperature" in str(reasons[3])
    assert "different BERTScore encoders" in str(reasons[4])
    assert all("--allow" not in str(reason) for reason in reasons)
    site = read_site(root)
    first = site.series[0]
    labels = [release_label(i, r, first.basis) for i, r in enumerate(first.releases)]
    assert labels == [
        "1. smollm2-135m @b179c95, e-first · 2026-11-01 09:00",
        "2. smollm2-135m @b179c95, d-second · 2026-11-02 09:00",
    ]
    figure = trend_figure(first, site.runs)
    assert "first started" in figure["layout"]["xaxis"]["title"]["text"]


def test_a_rerun_that_rewrites_and_touches_a_manifest_keeps_the_order(tmp_path: Path) -> None:
    root = mixed_designs(tmp_path / "runs")
    before = _lines(root)
    manifest = root / "e-first" / "manifest.json"
    rewritten = json.loads(manifest.read_text())
    rewritten["written_at"] = "2026-12-01T00:00:00+00:00"  # a cached rerun, a month later
    manifest.write_text(json.dumps(rewritten))
    later = (root / "a-sampled" / "manifest.json").stat().st_mtime + 3600
    os.utime(manifest, (later, later))
    assert _lines(root) == before


def test_a_date_in_the_releases_names_orders_their_line(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    newer, older = "api:openai/gpt-4o-mini-2024-07-18", "api:openai/gpt-4o-2024-05-13"
    _run(root, "x", {newer: (newer, {"act": 0.2})}, CONFIG, 3, "2026-11-01T09:00:00+00:00")
    _run(root, "y", {older: (older, {"act": 0.3})}, CONFIG, 3, "2026-11-02T09:00:00+00:00")
    board = [{"model": m, "identity": m, "family": "gpt-4o"} for m in (newer, older)]
    pl.DataFrame(board).write_parquet(root / "leaderboard.parquet")
    (line,) = read_site(root).series
    assert [r.spec for r in line.releases] == [older, newer]
    assert line.basis == "released" and "name" in line.legend
    # an API model's identity is its name, not a revision: no "@..." in its label
    label = release_label(0, line.releases[0], line.basis)
    assert label == "1. gpt-4o-2024-05-13, y · 2024-05-13 00:00"


def test_the_site_over_two_designs_draws_two_lines_and_says_why(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    _one(root, "demo", "2026-11-01T09:00:00+00:00", DEMO)
    _one(root, "other-settings", "2026-11-02T09:00:00+00:00", SHORT, prompts=2)
    index = build_site(root, tmp_path / "site").read_text(encoding="utf-8")
    assert index.count("Plotly.newPlot") == 2
    assert "Line 1 of 2: 1 release of one design" in index
    assert "Line 2 of 2: 1 release of one design" in index
    assert index.count("Not joined to line 1:") == 1
    assert "generation.max_new_tokens (decoding): 40 vs 8" in index


def test_a_rerun_of_the_same_config_keeps_the_manifests_start_time(tmp_path: Path) -> None:
    from sago.tasks.provenance import first_started
    from sago_core.config import RunConfig

    config, other = RunConfig(), RunConfig(n=3)
    manifest = tmp_path / "manifest.json"
    now = {"started_at": "2026-12-05T09:00:00+00:00"}
    assert first_started(config, manifest, now) == now["started_at"]  # no manifest yet
    kept = {"config_hash": config.result_hash(), "started_at": "2026-11-01T09:00:00+00:00"}
    manifest.write_text(json.dumps(kept | {"written_at": "2026-11-01T09:05:00+00:00"}))
    assert first_started(config, manifest, now) == kept["started_at"]  # a rerun
    assert first_started(other, manifest, now) == now["started_at"]  # another config
