"""The report's instance explorer in headless Chromium: filters change what is shown, the
table follows the chosen axis, the page stays one offline file, and 10,000 variants open,
filter, sort as numbers and page within a 1280 px window."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from sago_core.report.page.html import STYLE, render_report
from sago_core.report.sections.explorer import (
    PER_GROUP,
    explorer_rows,
    explorer_section,
    worst_rows,
)
from sago_core.report.sections.insights import Insights
from sago_core.scoring.prompt_scores import score_prompts
from sago_core.scoring.summary import summarize
from sago_core.stages.instances import build_instances
from sago_core.statistics.axis_structure import pca_table, spearman_table
from sago_core.statistics.tails import tail_statistics
from tests.browser import FLAGS, chromium, probe_json
from tests.unit.test_explorer import LANGUAGES, NUMERIC_ORDER, SUBTYPES, N, synthetic_instances
from tests.unit.test_tails import raw_run

pytestmark = pytest.mark.slow  # a browser and the report's figures

# Once the explorer has drawn: read the table, then set each filter in turn and read it again.
PROBE = """<script>window.addEventListener('load',async()=>{const out={};try{
await window.sagoExplorer.ready;
const read=()=>[...document.querySelectorAll('#explorer-rows tr')].map(tr=>
  [...tr.children].map(td=>td.textContent));
const set=(id,v)=>{const s=document.getElementById('explorer-'+id);s.value=v;
  s.dispatchEvent(new Event('change'));};
out.columns=[...document.querySelectorAll('#explorer-head th')].map(th=>th.dataset.col);
out.all=read();
set('dataset','d2');out.dataset=read();
set('family','register');out.family=read();
set('strength','2');out.strength=read();
set('position','prefix');out.position=read();
set('dataset','__any__');set('family','__any__');set('strength','__any__');
set('position','__any__');set('axis','prob');out.prob=read();
out.count=document.getElementById('explorer-count').textContent;
}catch(e){out.error=String(e)+' '+e.stack;}
document.body.setAttribute('data-explorer',JSON.stringify(out));});</script>"""


def _page(tmp_path: Path) -> tuple[Path, pl.DataFrame]:
    raw = raw_run(prompts=4)
    # two positions, so the position filter has something to choose
    raw["deltas"] = raw["deltas"].with_columns(
        pl.when(pl.col("prompt_id").is_in(["p0", "p1"]))
        .then(pl.lit("prefix"))
        .otherwise(pl.col("position"))
        .alias("position")
    )
    instances = build_instances(raw["deltas"], raw["generations"], raw["prompts"])
    scores = score_prompts(raw["deltas"])
    variants = (
        raw["deltas"]
        .select("dataset", "prompt_id", "variant_id", "family")
        .unique()
        .with_columns(pl.lit(True).alias("kept"))
    )
    tails = tail_statistics(instances, resamples=100)
    insights = Insights(instances, tails, spearman_table(scores), pca_table(scores))
    page = render_report(
        summarize(scores),
        scores,
        raw["deltas"],
        variants,
        raw["prompts"],
        raw["generations"].with_columns(pl.lit('{"backend": "hand-built"}').alias("engine")),
        {"run_id": "test"},
        insights=insights,
    )
    path = tmp_path / "report.html"
    path.write_text(page, encoding="utf-8")
    return path, instances


def _explore(page: Path, work: Path, probe: str = PROBE, width: int = 1280) -> dict:
    """Run ``probe`` in Chromium over a copy of ``page``; what it recorded, and how long
    Chromium took from start to exit (``wall_s``)."""
    started = time.perf_counter()
    seen = probe_json(page, probe, "explorer", work, width)
    return {**seen, "wall_s": time.perf_counter() - started}


def test_filters_change_what_the_explorer_shows(tmp_path: Path) -> None:
    page, instances = _page(tmp_path)
    text = page.read_text(encoding="utf-8")
    # one offline file: no external scripts, styles, images or frames
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", text)
    assert "<link" not in text and "@import" not in text
    seen = _explore(page, tmp_path)
    col = {name: i for i, name in enumerate(seen["columns"])}
    assert seen["columns"][:6] == ["model", "dataset", "family", "subtype", "strength", "position"]
    embedded = explorer_rows(instances)
    assert 0 < len(seen["all"]) <= 25 and len(embedded) > len(seen["all"]) - 1
    assert {r[col["dataset"]] for r in seen["all"]} == {"d1", "d2"}
    assert seen["dataset"] and {r[col["dataset"]] for r in seen["dataset"]} == {"d2"}
    assert {r[col["family"]] for r in seen["family"]} == {"register"}
    assert {r[col["dataset"]] for r in seen["family"]} == {"d2"}
    assert seen["strength"] and {r[col["strength"]] for r in seen["strength"]} == {"2"}
    assert seen["position"] and {r[col["position"]] for r in seen["position"]} == {"prefix"}
    assert len(seen["position"]) < len(seen["strength"]) < len(seen["family"])
    # sorted by |d_act| at first, by |d_prob| once chosen
    first = [abs(float(r[col["d_act"]])) for r in seen["all"]]
    assert first == sorted(first, reverse=True)
    prob = [abs(float(r[col["d_prob"]])) for r in seen["prob"]]
    assert prob == sorted(prob, reverse=True)
    top = embedded.drop_nulls("d_prob")["d_prob"].abs().max()
    assert prob[0] == pytest.approx(top, abs=1e-4)
    assert "with a measured prob delta" in seen["count"]


def test_the_page_embeds_the_worst_variants_per_group() -> None:
    raw = raw_run(prompts=4)
    instances = build_instances(raw["deltas"], raw["generations"], raw["prompts"])
    rows = worst_rows(instances)
    for (dataset, family), group in instances.group_by("dataset", "family"):
        picked = rows.filter((pl.col("dataset") == dataset) & (pl.col("family") == family))
        for axis in ("bleu", "ent"):
            want = group.drop_nulls(f"d_{axis}")[f"d_{axis}"].abs().sort(descending=True)
            have = picked[f"d_{axis}"].drop_nulls().abs()
            assert set(want.head(PER_GROUP).to_list()) <= set(have.to_list())


def _real_times(page: Path, work: Path, width: int = 1280) -> dict:
    """Real milliseconds (the DOM probes above run under virtual time, where
    ``performance.now()`` stands still while a script runs): Chromium driven through the
    DevTools protocol on a pipe, no virtual time; the page opens, then the probe awaits the
    explorer's first page (``openedMs``: since navigation start) and times a subtype filter."""
    cmd_read, cmd_write = os.pipe()
    out_read, out_write = os.pipe()

    def on_fds_3_and_4() -> None:  # the pipe's fixed descriptors: commands in, replies out
        os.dup2(cmd_read, 3)
        os.dup2(out_write, 4)

    flags = [f for f in FLAGS if not f.startswith("--virtual-time-budget")]
    browser = subprocess.Popen(
        [chromium(), *flags, f"--window-size={width},900", f"--user-data-dir={work / 'cdp'}",
         "--remote-debugging-pipe", "about:blank"],
        pass_fds=(3, 4),
        preexec_fn=on_fds_3_and_4,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    os.close(cmd_read)
    os.close(out_write)
    pending = b""
    sent = 0

    def receive(until: Callable[[dict], bool]) -> dict:
        nonlocal pending
        deadline = time.monotonic() + 60
        while True:
            while b"\0" in pending:
                message, pending = pending.split(b"\0", 1)
                found = json.loads(message)
                if until(found):
                    return found
            ready, _, _ = select.select([out_read], [], [], max(0.0, deadline - time.monotonic()))
            assert ready, "Chromium's DevTools pipe went silent"
            chunk = os.read(out_read, 1 << 20)
            assert chunk, "Chromium closed its DevTools pipe"
            pending += chunk

    def call(method: str, session: str | None = None, **params: object) -> dict:
        nonlocal sent
        sent += 1
        message = {"id": sent, "method": method, "params": params}
        os.write(
            cmd_write,
            json.dumps({**message, **({"sessionId": session} if session else {})}).encode() + b"\0",
        )
        reply = receive(lambda m: m.get("id") == sent)
        assert "error" not in reply, reply
        return reply["result"]

    try:
        target = call("Target.createTarget", url="about:blank")["targetId"]
        session = call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        call("Page.enable", session)
        call("Page.navigate", session, url=page.as_uri())
        receive(lambda m: m.get("method") == "Page.loadEventFired")
        probe = (
            "window.sagoExplorer.ready.then(api=>{const s=document.getElementById("
            "'explorer-subtype');const t=performance.now();s.value='sub3';"
            "s.dispatchEvent(new Event('change'));return {openedMs:api.openedMs,"
            "filterMs:performance.now()-t};})"
        )
        result = call(
            "Runtime.evaluate", session, expression=probe, awaitPromise=True, returnByValue=True
        )
        times: dict = result["result"]["value"]
        return times
    finally:
        os.close(cmd_write)
        os.close(out_read)
        browser.kill()
        browser.wait(timeout=30)


# The 10,000-variant page: what the first page shows, a subtype (then language) filter, paging
# to the last page, sorting strengths and a delta column, the page's width.
PROBE_LARGE = """<script>window.addEventListener('load',async()=>{const out={};try{
await window.sagoExplorer.ready;out.openedMs=window.sagoExplorer.openedMs;
const read=()=>[...document.querySelectorAll('#explorer-rows tr')].map(tr=>
  [...tr.children].map(td=>td.textContent));
const text=id=>document.getElementById('explorer-'+id).textContent;
const set=(id,v)=>{const s=document.getElementById('explorer-'+id);s.value=v;
  s.dispatchEvent(new Event('change'));};
const sortBy=c=>document.querySelector('#explorer-head th[data-col="'+c+'"]').click();
out.columns=[...document.querySelectorAll('#explorer-head th')].map(th=>th.dataset.col);
out.first=read();out.firstCount=text('count');out.firstPage=text('page');
out.width=[window.innerWidth,document.documentElement.scrollWidth];
const t=performance.now();set('subtype','sub3');out.filterMs=performance.now()-t;
out.subCount=text('count');out.sub=read();
set('size','100');for(let k=0;k<14;k++)document.getElementById('explorer-next').click();
out.subLast=read();out.subLastPage=text('page');
set('language','ja');out.subLanguage=text('count');
set('subtype','__any__');set('language','__any__');set('dataset','tiny');
sortBy('strength');out.strengthUp=read();sortBy('strength');out.strengthDown=read();
set('dataset','__any__');sortBy('d_bleu');out.bleuUp=read();
out.widthAfter=document.documentElement.scrollWidth;
}catch(e){out.error=String(e)+' '+e.stack;}
document.body.setAttribute('data-explorer',JSON.stringify(out));});</script>"""


def test_ten_thousand_variants_open_filter_sort_and_fit(tmp_path: Path) -> None:
    instances = synthetic_instances()
    page = tmp_path / "explorer.html"
    page.write_text(
        f'<!doctype html><html><head><meta charset="utf-8"><style>{STYLE}</style></head>'
        f"<body><h2>Instance explorer</h2>{explorer_section(instances)}</body></html>",
        encoding="utf-8",
    )
    seen = _explore(page, tmp_path, PROBE_LARGE)
    real = _real_times(page, tmp_path)
    print(
        f"\n10,000-variant explorer: {page.stat().st_size / 1e6:.2f} MB page; opened (first page "
        f"drawn) {real['openedMs']:.0f} ms after navigation start; subtype filter "
        f"{real['filterMs']:.1f} ms; Chromium start to exit {seen['wall_s']:.1f} s"
    )
    col = {name: i for i, name in enumerate(seen["columns"])}
    assert list(col) == [
        "model", "dataset", "family", "subtype", "strength", "position", "language",
        "base_prompt", "variant_prompt", "base_answer", "variant_answer",
        "d_act", "d_bleu", "d_bert", "d_prob", "d_ent", "d_mr", "mr_intensity",
    ]  # fmt: skip
    # opens on its first page: 25 rows of 10,000, the largest |d_act| (0.5, at 37 i = 0 mod 1000)
    assert len(seen["first"]) == 25
    assert seen["firstCount"].startswith(f"{N} matching variant(s)")
    assert seen["firstPage"] == f"rows 1-25 of {N} (page 1 of {N // 25})"
    assert seen["first"][0][col["d_act"]] == "-0.5000"
    # no horizontal overflow at 1280 px, all 18 columns shown, a 400-letter word included
    assert seen["width"][0] == 1280 and seen["width"][1] <= 1280
    assert seen["widthAfter"] <= 1280
    # subtype sub3 holds the rows i = 3 mod 7: 1429 of them, last page of 100 holds 29
    per_subtype = len(range(3, N, SUBTYPES))
    assert per_subtype == 1429
    assert seen["subCount"].startswith(f"{per_subtype} matching variant(s)")
    assert len(seen["sub"]) == 25 and {r[col["subtype"]] for r in seen["sub"]} == {"sub3"}
    assert seen["subLastPage"] == f"rows 1401-{per_subtype} of {per_subtype} (page 15 of 15)"
    assert len(seen["subLast"]) == 29 and {r[col["subtype"]] for r in seen["subLast"]} == {"sub3"}
    # and language ja (i = 2 mod 3): i = 17 mod 21
    assert seen["subLanguage"].startswith(f"{len(range(17, N, 21))} matching variant(s)")
    assert LANGUAGES[2] == "ja"
    # strengths sort as numbers, both ways
    assert [r[col["strength"]] for r in seen["strengthUp"]] == NUMERIC_ORDER
    assert [r[col["strength"]] for r in seen["strengthDown"]] == NUMERIC_ORDER[::-1]
    # a delta column too: -10 first (53 i = 0 mod 2001 at i = 2001), ascending as numbers
    bleu = [float(r[col["d_bleu"]]) for r in seen["bleuUp"]]
    assert bleu[0] == -10.0 and bleu == sorted(bleu) and len(bleu) == 100
