"""The report's instance explorer in headless Chromium: filters change what is shown, the
table follows the chosen axis, and the page stays one offline file."""

from __future__ import annotations

import json
import re
import subprocess
from html import unescape
from pathlib import Path

import polars as pl
import pytest

from sago_core.report.explorer import PER_GROUP, worst_rows
from sago_core.report.html import render_report
from sago_core.report.insights import Insights
from sago_core.scoring.prompt_scores import score_prompts
from sago_core.scoring.summary import summarize
from sago_core.stages.instances import build_instances
from sago_core.statistics.axis_structure import pca_table, spearman_table
from sago_core.statistics.tails import tail_statistics
from tests.browser import FLAGS, chromium
from tests.unit.test_tails import raw_run

pytestmark = pytest.mark.slow  # a browser and the report's figures

# After load: read the table, then set each filter in turn and read it again.
PROBE = """<script>window.addEventListener('load',()=>{
const read=()=>[...document.querySelectorAll('#explorer-rows tr')].map(tr=>
  [...tr.children].map(td=>td.textContent));
const set=(id,v)=>{const s=document.getElementById('explorer-'+id);s.value=v;
  s.dispatchEvent(new Event('change'));};
const out={all:read()};
set('dataset','d2');out.dataset=read();
set('family','register');out.family=read();
set('strength','2');out.strength=read();
set('position','prefix');out.position=read();
set('dataset','__any__');set('family','__any__');set('strength','__any__');
set('position','__any__');set('axis','prob');out.prob=read();
out.count=document.getElementById('explorer-count').textContent;
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


def _explore(page: Path, work: Path) -> dict:
    probe = work / "probe.html"
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"))
    done = subprocess.run(
        [chromium(), *FLAGS, f"--user-data-dir={work / 'profile'}", "--dump-dom", probe.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    found = re.search(r'data-explorer="([^"]*)"', done.stdout)
    assert found, "the explorer never ran in Chromium"
    return json.loads(unescape(found.group(1)))


def test_filters_change_what_the_explorer_shows(tmp_path: Path) -> None:
    page, instances = _page(tmp_path)
    text = page.read_text(encoding="utf-8")
    # one offline file: no external scripts, styles, images or frames
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", text)
    assert "<link" not in text and "@import" not in text
    seen = _explore(page, tmp_path)
    columns = ["model", "dataset", "family", "strength", "position"]
    col = {name: i for i, name in enumerate(columns)}
    embedded = worst_rows(instances)
    assert 0 < len(seen["all"]) <= 25 and len(embedded) > len(seen["all"]) - 1
    assert {r[col["dataset"]] for r in seen["all"]} == {"d1", "d2"}
    assert seen["dataset"] and {r[col["dataset"]] for r in seen["dataset"]} == {"d2"}
    assert {r[col["family"]] for r in seen["family"]} == {"register"}
    assert {r[col["dataset"]] for r in seen["family"]} == {"d2"}
    assert seen["strength"] and {r[col["strength"]] for r in seen["strength"]} == {"2"}
    assert seen["position"] and {r[col["position"]] for r in seen["position"]} == {"prefix"}
    assert len(seen["position"]) < len(seen["strength"]) < len(seen["family"])
    # sorted by |d_act| at first (after 5 filters and 4 texts), by |d_prob| once chosen
    first = [abs(float(r[9])) for r in seen["all"]]
    assert first == sorted(first, reverse=True)
    prob = [abs(float(r[12])) for r in seen["prob"]]
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
