"""The results site (sago_core/site, `sago site`) over a hand-made three-release watch: the
trend points, intervals and regression marks are the runs' own numbers, every link of every
page resolves, copied reports link back, and on an object store the site is written to the
store and its address is the store's, not a file:// path."""

from __future__ import annotations

import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import polars as pl
import pytest

from sago_core.artifacts.schemas import SUMMARY
from sago_core.site.address import site_address, web_address
from sago_core.site.build import build_site
from sago_core.site.collect import read_site
from sago_core.site.local_paths import LocalPaths
from sago_core.site.trends import REGRESSION_NAME, trend_figure
from sago_core.storage.location import parse_store_url
from sago_core.vocabulary import AXES, POOLED

SPEC = "mock:family-a"
OTHER = "mock:solo"
FAMILY = "arch:model_type=llama/num_hidden_layers=3"
# (run id, identity, evaluated_at, pooled SGS per axis, (ci_low, ci_high) half-width).
# Run ids sort against time: the trend must follow evaluated_at, not the folder names.
RELEASES: list[tuple[str, str, float, dict[str, float | None]]] = [
    ("watch-c", "sha256:aaaa111", 1000.0, {"act": 0.10, "prob": 0.20, "mr": None}),
    ("watch-b", "sha256:bbbb222", 2000.0, {"act": 0.11, "prob": 0.21, "mr": 0.05}),
    ("watch-a", "sha256:cccc333", 3000.0, {"act": 0.12, "prob": 0.40, "mr": 0.06}),
]
HALF = 0.02
# Paired verdicts of each release against the one before it: the third regressed on prob.
VERDICTS: list[dict[str, str]] = [
    {},
    {"act": "equivalent", "prob": "inconclusive", "mr": "equivalent"},
    {"act": "equivalent", "prob": "b_worse", "mr": "inconclusive"},
]


def _summary(spec: str, sgs: dict[str, float | None]) -> pl.DataFrame:
    rows = []
    for axis in AXES:
        value = sgs.get(axis, 0.25 + 0.05 * AXES.index(axis))
        row: dict[str, Any] = {c: None for c in SUMMARY}
        row.update(model=spec, dataset=POOLED, axis=axis, sgs=value, n=40, p_holm=0.01)
        if value is None:
            row["missing_reason"] = "too few answers"
        else:
            row.update(ci_low=value - HALF, ci_high=value + HALF)
        rows.append(row)
    return pl.DataFrame(rows, schema=SUMMARY)


CONFIG = {"preset": "demo", "datasets": ["toy"], "n": 40, "seed": 0}


def _run(
    root: Path,
    run_id: str,
    models: dict[str, tuple[str, dict[str, float | None]]],
    config: dict[str, Any] | None = None,
    prompts: int = 3,
    started_at: str | None = None,
) -> Path:
    """A finished run's folder: manifest, summary, scores and prompts (what decides whether
    two runs share a trend line), report and card."""
    folder = root / run_id
    folder.mkdir(parents=True)
    manifest = {
        "run_id": run_id,
        "written_at": "2026-11-01T10:00:00+00:00",
        "config_hash": "f" * 64,
        "config": config or CONFIG,
        "models": {spec: {"identity": identity} for spec, (identity, _) in models.items()},
    }
    if started_at:
        manifest["started_at"] = started_at
    (folder / "manifest.json").write_text(json.dumps(manifest))
    frames = [_summary(spec, sgs) for spec, (_, sgs) in models.items()]
    pl.concat(frames).write_parquet(folder / "summary.parquet")
    keys = [("toy", f"p{i}") for i in range(prompts)]
    scores = [
        {"model": spec, "dataset": d, "prompt_id": p, "axis": "act", "s": 0.1}
        for spec in models
        for d, p in keys
    ]
    pl.DataFrame(scores).write_parquet(folder / "scores.parquet")
    texts = [{"dataset": d, "prompt_id": p, "prompt": f"question {p}?"} for d, p in keys]
    pl.DataFrame(texts).write_parquet(folder / "prompts.parquet")
    (folder / "report.html").write_text(f"<html><body><h1>report {run_id}</h1></body></html>")
    (folder / "card.html").write_text(f"<html><body><h1>card {run_id}</h1></body></html>")
    return folder


def three_release_watch(root: Path) -> Path:
    """A watch's runs folder as sago_core/watch leaves it, written by hand: three releases
    of one family (registry entries, cards with paired verdicts, the leaderboard's family
    and page) and one run of another model the watch never saw."""
    registry = root / "registry"
    registry.mkdir(parents=True)
    board = []
    for index, (run_id, identity, at, sgs) in enumerate(RELEASES):
        folder = _run(root, run_id, {SPEC: (identity, sgs)})
        entry = {"spec": SPEC, "identity": identity, "run_dir": str(folder), "evaluated_at": at}
        (registry / f"{index}.json").write_text(json.dumps(entry))
        board.append({"model": SPEC, "identity": identity, "family": FAMILY})
        card: dict[str, Any] = {"paired": None, "paired_note": "first release of the family"}
        if VERDICTS[index]:
            previous = root / RELEASES[index - 1][0]
            rows = [
                {
                    "axis": axis,
                    "n": 40,
                    "mean_diff": 0.19 if verdict == "b_worse" else 0.0,
                    "ci_low": 0.1,
                    "ci_high": 0.3,
                    "p_holm": 0.001 if verdict == "b_worse" else 0.5,
                    "p_tost_holm": 0.9,
                    "model_a": SPEC,
                    "model_b": SPEC,
                    "verdict": verdict,
                }
                for axis, verdict in VERDICTS[index].items()
            ]
            card = {"paired": {"against": str(previous), "rows": rows}, "paired_note": None}
        (folder / "card.json").write_text(json.dumps(card))
    pl.DataFrame(board).write_parquet(root / "leaderboard.parquet")
    links = "".join(f'<a href="{run_id}/card.html">card</a>' for run_id, *_ in RELEASES)
    (root / "leaderboard.html").write_text(f"<html><body>{links}</body></html>")
    _run(root, "adhoc", {OTHER: ("sha256:dddd444", {"act": 0.5})})
    (root / "unfinished").mkdir()  # no manifest: not a run
    return root


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("id"):
            self.ids.add(str(found["id"]))
        for name in ("href", "src"):
            if found.get(name):
                self.links.append(str(found[name]))


def parsed(page: Path) -> _Links:
    links = _Links()
    links.feed(page.read_text(encoding="utf-8"))
    return links


def broken_links(site: Path) -> list[str]:
    """Every href/src of every page that leaves the site or does not reach a file (or its
    #anchor); inline data: URIs (the report's figures) are in the page itself."""
    broken = []
    for page in site.rglob("*.html"):
        for link in parsed(page).links:
            parts = urlsplit(link)
            if parts.scheme == "data":  # an inline figure
                continue
            if parts.scheme or link.startswith("//"):
                broken.append(f"{page}: {link} (leaves the site)")
                continue
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if not target.is_file():
                broken.append(f"{page}: {link}")
            elif parts.fragment and parts.fragment not in parsed(target).ids:
                broken.append(f"{page}: {link} (no such anchor)")
    return broken


def test_the_trend_follows_release_order_with_the_runs_intervals_and_marks_the_regression(
    tmp_path: Path,
) -> None:
    site = read_site(three_release_watch(tmp_path / "runs"))
    families = site.families()
    assert set(families) == {FAMILY, OTHER}  # the leaderboard's family; the other its spec
    (line,) = families[FAMILY]  # one design: one line
    releases = line.releases
    assert [r.run_id for r in releases] == ["watch-c", "watch-b", "watch-a"]
    assert line.basis == "watched" and line.apart is None
    figure = trend_figure(line, site.runs)
    traces = {t["name"]: t for t in figure["data"]}
    assert list(traces) == [*AXES, REGRESSION_NAME]
    prob = traces["prob"]
    assert prob["y"] == [0.20, 0.21, 0.40]
    assert prob["error_y"]["array"] == pytest.approx([HALF] * 3)
    assert prob["error_y"]["arrayminus"] == pytest.approx([HALF] * 3)
    assert traces["mr"]["y"] == [None, 0.05, 0.06]  # NA is a gap, never 0
    assert traces["mr"]["error_y"]["array"][0] is None
    marked = traces[REGRESSION_NAME]
    assert marked["x"] == [prob["x"][2]] and marked["y"] == [0.40]
    assert "prob" in marked["text"][0]
    assert prob["x"][0] == "1. family-a @aaaa111<br>watch-c · 1970-01-01 00:16"
    assert [r.regressions for r in releases] == [[], [], ["prob"]]
    assert releases[2].against_run == "watch-b" and releases[0].note


def test_every_page_links_resolve_and_copies_link_back(tmp_path: Path) -> None:
    root = three_release_watch(tmp_path / "runs")
    index = build_site(root, tmp_path / "site")
    site = index.parent
    assert broken_links(site) == []
    pages = {p.relative_to(site).as_posix() for p in site.rglob("*.html")}
    assert {
        "index.html",
        "leaderboard.html",
        "runs.html",
        "runs/releases.html",
        "runs/watch-a/index.html",
        "runs/adhoc/report.html",
        "runs/watch-b/card.html",
    } <= pages
    compares = sorted(p for p in pages if p.startswith("compare/"))
    assert [p.split("--")[0] for p in compares] == ["compare/watch-a", "compare/watch-b"]
    assert "unfinished" not in str(pages)
    front = index.read_text()
    for run_id in ("watch-a", "watch-b", "watch-c", "adhoc"):
        assert f'href="runs/{run_id}/index.html"' in front
    assert front.count("Plotly.newPlot") == 2 and '<script src="assets/plotly.min.js">' in front
    assert "cdn" not in front.lower() and (site / "assets" / "plotly.min.js").stat().st_size > 1e6
    report = (site / "runs" / "watch-a" / "report.html").read_text()
    assert '<body><nav class="sago-site-back"' in report and "report watch-a" in report
    assert 'href="../../index.html"' in report and 'href="../../runs/watch-a/index.html"' in report
    run_page = (site / "runs" / "watch-b" / "index.html").read_text()
    assert "compared with the later release" in run_page  # watch-a was compared with it
    assert '"preset": "demo"' in run_page and "Configuration" in run_page
    board = (site / "leaderboard.html").read_text()
    assert re.search(r'class="regression">0\.4000 \[0\.3800, 0\.4200\] ▲', board)
    assert board.count("▲</span>") == 1
    regressed = (site / compares[0]).read_text()
    assert '<span class="regression">b_worse</span>' in regressed


def test_a_site_on_an_object_store_is_written_to_it(tmp_path: Path) -> None:
    from obstore.store import MemoryStore

    from sago_core.storage import attached
    from sago_core.storage.mirror import Mirror
    from sago_core.storage.objects import ObjectStore

    location = parse_store_url("s3://bucket/team/runs")
    store = ObjectStore(location, MemoryStore())
    scratch = tmp_path / "scratch"
    three_release_watch(tmp_path / "made")
    for path in (tmp_path / "made").rglob("*"):
        if path.is_file():
            store.put(path.relative_to(tmp_path / "made").as_posix(), path.read_bytes())
    mirror = Mirror(store, scratch, local_folders=(), local_names=())
    scratch.mkdir()
    attached.attach(mirror)
    try:
        index = build_site(scratch, scratch / "site")  # nothing local: all from the store
        address = site_address(index, env={"AWS_ENDPOINT_URL": "http://minio:9000"})
    finally:
        attached.attach(None)
    keys = set(store.keys(""))
    assert {"site/index.html", "site/runs/watch-a/report.html", "site/assets/plotly.min.js"} <= keys
    assert address.store_url == "s3://bucket/team/runs/site/index.html"
    assert address.best == "http://minio:9000/bucket/team/runs/site/index.html"
    assert not (scratch / "watch-a" / "generations.parquet").exists()  # only what it reads


def test_web_addresses_follow_each_providers_convention(tmp_path: Path) -> None:
    s3 = parse_store_url("s3://b/p")
    assert web_address(s3, "site/index.html", {}) == "https://b.s3.amazonaws.com/p/site/index.html"
    regional = web_address(s3, "x.html", {"AWS_REGION": "eu-west-1"})
    assert regional == "https://b.s3.eu-west-1.amazonaws.com/p/x.html"
    gs = parse_store_url("gs://g")
    assert (
        web_address(gs, "site/index.html", {}) == "https://storage.googleapis.com/g/site/index.html"
    )
    azure = parse_store_url("az://container/runs")
    assert web_address(azure, "i.html", {}) is None
    named = web_address(azure, "i.html", {"AZURE_STORAGE_ACCOUNT_NAME": "acct"})
    assert named == "https://acct.blob.core.windows.net/container/runs/i.html"
    local = site_address(tmp_path / "index.html")
    assert local.best == (tmp_path / "index.html").as_uri() and local.store_url is None


def test_the_site_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from sago_cli.main import main

    root = three_release_watch(tmp_path / "runs")
    assert main(["site", str(root)]) == 0
    default = root / "site" / "index.html"
    assert capsys.readouterr().out.strip() == f"Site: {default.as_uri()}"
    shutil.rmtree(root / "site")
    assert main(["site", str(root), "--out", str(tmp_path / "elsewhere")]) == 0
    assert (tmp_path / "elsewhere" / "index.html").is_file() and not default.exists()
    (tmp_path / "empty").mkdir()
    assert main(["site", str(tmp_path / "empty")]) == 2
    assert "holds no finished run" in capsys.readouterr().err
    assert main(["site", str(tmp_path / "absent")]) == 2
    assert "no such folder" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["site", "--help"])
    assert "(default: RUNS/site;" in " ".join(capsys.readouterr().out.split())


def test_building_the_site_counts_its_runs_read_and_pages_written(tmp_path: Path) -> None:
    from sago_core.progress import Progress, reporting

    root = three_release_watch(tmp_path / "runs")
    lines: list[Progress] = []
    with reporting("site", lines.append, 60.0):
        build_site(root, tmp_path / "site")
    runs = len([p for p in root.iterdir() if (p / "manifest.json").is_file()])
    assert runs == 4
    # every run read, then every run's page: a line when the count starts, one at the end
    assert [(line.done, line.total, line.final) for line in lines] == [
        (0, runs, False),
        (2 * runs, 2 * runs, True),
    ]


def test_a_site_names_runs_by_id_and_files_by_name_never_this_machines_paths(
    tmp_path: Path,
) -> None:
    """A run scored from an API model's file (its model a name, no BACKEND:ID) builds into
    the site under that name; the runs folder, the scored file, the run a card compared
    with, a configuration's places and a refused pairing's files are named, never printed
    as paths of this machine."""
    root = tmp_path / "runs"
    scored_file = tmp_path / "inputs" / "results.csv"
    config = {
        **CONFIG,
        "runs_dir": str(root),
        "prefect_home": str(tmp_path / "prefect"),
        # this machine's dataset file, data and encoder folders and a local judge's folder
        "datasets": [f"{tmp_path / 'private' / 'q.csv'}#answer=gold", "toy"],
        "data_dir": str(tmp_path / "data"),
        "bertscore": {"model": str(tmp_path / "encoders" / "minilm")},
        "judge": {"model": f"hf:{tmp_path / 'judges' / 'judge-7b'}"},
        "api": {"base_url": "https://u:SECRET@h/v1?key=SECRET"},
    }
    first = _run(root, "scored-1", {"gemini-2.5-flash": ("", {"act": None})}, config)
    later = _run(root, "scored-2", {"gemini-2.5-flash": ("", {"act": None})}, config, prompts=4)
    for folder in (first, later):
        manifest = json.loads((folder / "manifest.json").read_text())
        manifest["models"], manifest["external"] = {}, {"file": str(scored_file)}
        (folder / "manifest.json").write_text(json.dumps(manifest))
        (folder / "report.html").write_text(
            f"<html><body>External generations: <code>{scored_file}</code> in "
            f"{folder}</body></html>"
        )
    card = {"paired": {"against": str(first), "rows": []}, "paired_note": None}
    (later / "card.json").write_text(json.dumps(card))
    (later / "card.html").write_text(f"<html><body>A = gemini-2.5-flash ({first})</body></html>")

    index = build_site(root, tmp_path / "site")
    text = index.read_text(encoding="utf-8")
    assert "gemini-2.5-flash" in text
    assert "<code>runs</code>" in text  # the runs folder by its name
    # the later run asks another prompt: its own line, the reason naming files by run id
    assert "Not joined to line 1" in text and "scored-2/scores.parquet" in text
    pages = list(index.parent.rglob("*.html"))
    assert len(pages) >= 7
    assert [p for p in pages if str(tmp_path) in p.read_text(encoding="utf-8")] == []
    assert [p for p in pages if "SECRET" in p.read_text(encoding="utf-8")] == []
    run_page = (index.parent / "runs" / "scored-2" / "index.html").read_text(encoding="utf-8")
    assert '"runs_dir": "runs"' in run_page and '"prefect_home": "prefect"' in run_page
    assert '"q.csv#answer=gold"' in run_page and '"data_dir": "data"' in run_page
    assert '"model": "minilm"' in run_page and '"model": "hf:judge-7b"' in run_page
    assert '"base_url": "https://h/v1"' in run_page
    report = (index.parent / "runs" / "scored-2" / "report.html").read_text(encoding="utf-8")
    assert "<code>results.csv</code> in scored-2" in report
    copied_card = (index.parent / "runs" / "scored-2" / "card.html").read_text(encoding="utf-8")
    assert "A = gemini-2.5-flash (scored-1)" in copied_card


def test_a_short_runs_folder_is_replaced_only_where_it_stands_whole() -> None:
    """A runs folder as short as ``/runs`` is also the tail of every relative link into it
    (``../runs/demo-1/``): only the path standing whole is replaced."""
    paths = LocalPaths((("/runs/demo-1", "demo-1"), ("/runs", "runs")))
    page = '<a href="../runs/demo-1/index.html">in /runs/demo-1</a> and "/runs". /runs2'
    assert paths.text(page) == (
        '<a href="../runs/demo-1/index.html">in demo-1</a> and "runs". /runs2'
    )
