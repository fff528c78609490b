"""report.html and consistency.html in headless Chromium at 1280 px;
the report at 1,400 and 1,000 px too (its story figures above its first
table, no header or explorer id broken inside a word, a scrolled table's first column kept):
no horizontal overflow (``document.documentElement.scrollWidth <= 1280``), every figure
decoded and labelled (an img's alt, an svg's aria-label or title), the headline block the
first section of the report, and the consistency page's wide checkpoint table scrolling
inside its own box. Both pages come from small hand-made artifacts.

``SAGO_SCREENSHOTS=DIR`` also saves a 1280 px screenshot of each page there (for a closing
note); without it nothing is written outside the test's own folder.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from sago_core.report.page.html import render_report
from sago_core.report.sections.insights import Insights
from sago_core.scoring.prompt_scores import score_prompts
from sago_core.scoring.summary import summarize
from sago_core.stages.instances import build_instances
from sago_core.statistics.axis_structure import pca_table, spearman_table
from sago_core.statistics.tails import tail_statistics
from sago_core.study.config import StudyStatistics
from sago_core.study.matrix import partial_correlation_table, sign_agreement
from sago_core.study.report import render_study
from tests.browser import FLAGS, chromium, probe_json, screenshot
from tests.unit.test_tails import raw_run

pytestmark = pytest.mark.slow  # a browser and two pages of figures

WIDTH = 1280
MODELS = ("hf:HuggingFaceTB/SmolLM2-135M-Instruct", "api:openai/gpt-4o-mini-2024-07-18")

# After load: the page's width, every figure with its label, the sections in order, the
# section of the first h2, every scrolling box's widths, and what sticks out of the page
# (an element inside a box below <body> that scrolls or clips sideways, such as the
# explorer's, does not: how wide a table's columns are depends on the machine's fonts).
PROBE = """<script>window.addEventListener('load',()=>{const out={};try{
const root=document.documentElement;
out.width=[window.innerWidth,root.scrollWidth];
out.figures=[...document.querySelectorAll('img,svg')].map(e=>[e.tagName.toLowerCase(),e.id,
  e.getAttribute('alt')||e.getAttribute('aria-label')||
  (e.querySelector&&e.querySelector('title')?e.querySelector('title').textContent:''),
  e.naturalWidth||0,Math.round(e.getBoundingClientRect().right)]);
out.sections=[...document.querySelectorAll('body > section')].map(s=>s.id);
const h2=document.querySelector('h2');out.firstH2=h2?[h2.textContent,
  h2.closest('section')?h2.closest('section').id:null]:null;
out.boxes=[...document.querySelectorAll('.scroll')].map(b=>[b.closest('section')?
  b.closest('section').id:null,b.scrollWidth,b.clientWidth,Math.round(b.getBoundingClientRect().right)]);
const clipped=e=>{for(let a=e.parentElement;a&&a!==document.body;a=a.parentElement){
  if(getComputedStyle(a).overflowX!=='visible')return true;}return false;};
out.outside=[...document.querySelectorAll('body *')].filter(e=>
  e.getBoundingClientRect().right>root.clientWidth+1&&!clipped(e)).slice(0,8).map(e=>
  e.tagName+'#'+e.id+'.'+e.className);
}catch(e){out.error=String(e)+' '+e.stack;}
document.body.setAttribute('data-probe',JSON.stringify(out));});</script>"""


def _report(folder: Path) -> Path:
    """Two models (long names), beside-the-mean artifacts, a comparison with an earlier
    release for the first model."""
    raw = raw_run(prompts=5)
    frames = {}
    for name in ("deltas", "generations"):
        first = raw[name].with_columns(pl.lit(MODELS[0]).alias("model"))
        second = raw[name].with_columns(pl.lit(MODELS[1]).alias("model"))
        if name == "deltas":
            second = second.with_columns(pl.col("delta_norm") * 1.5)
        frames[name] = pl.concat([first, second])
    deltas, generations, prompts = frames["deltas"], frames["generations"], raw["prompts"]
    scores = score_prompts(deltas)
    instances = build_instances(deltas, generations, prompts)
    variants = (
        deltas.select("dataset", "prompt_id", "variant_id", "family")
        .unique()
        .with_columns(pl.lit(True).alias("kept"))
    )
    paired = {
        "against": "runs/earlier-release",
        "margin": 0.02,
        "rows": [
            {"axis": axis, "model_a": "hf:earlier", "model_b": MODELS[0], "verdict": verdict}
            for axis, verdict in (("bleu", "b_worse"), ("act", "equivalent"), ("ent", None))
        ],
    }
    page = render_report(
        summarize(scores),
        scores,
        deltas,
        variants,
        prompts,
        generations,
        {"run_id": "browser-check"},
        insights=Insights(
            instances,
            tail_statistics(instances, resamples=50),
            spearman_table(scores),
            pca_table(scores),
        ),
        paired=paired,
    )
    path = folder / "report.html"
    path.write_text(page, encoding="utf-8")
    return path


OODS = ["truthfulqa", "nq_open", "simpleqa_verified"]


def _consistency(folder: Path) -> Path:
    """Seven checkpoints in one series, six metrics on four datasets: a 24-column table."""
    rng = np.random.default_rng(1)
    datasets = ["triviaqa", *OODS]
    scores = pl.DataFrame(
        [
            {"series": "finetune", "position": i, "model": f"hf:ckpt/finetune/step-{i:04d}"}
            | {"dataset": d, "metric": m, "value": float(i / 7 + rng.normal())}
            for m in ["ref_loglik", "accuracy", "sgs_act", "sgs_bleu", "sgs_prob", "sgs_ent"]
            for d in datasets
            for i in range(7)
        ]
    )
    table = partial_correlation_table(scores, "triviaqa", OODS, draws=99)
    settings = {
        "series": {"finetune": [f"m{i}" for i in range(7)]},
        "in_distribution": "triviaqa",
        "out_of_distribution": OODS,
        "statistics": StudyStatistics(report_metric="ref_loglik").model_dump(mode="json"),
    }
    split = {
        "evaluation_prompts": 8,
        "evaluation_datasets": datasets,
        "check": "none",
        "checkpoints": [],
    }
    page = render_study(scores, table, sign_agreement(table), settings, split)
    path = folder / "consistency.html"
    path.write_text(page, encoding="utf-8")
    return path


def _probe(page: Path, work: Path) -> dict:
    return probe_json(page, PROBE, "probe", work, WIDTH)


def _fits_and_labels(seen: dict, figures: int) -> None:
    assert seen["width"][0] == WIDTH
    assert seen["width"][1] <= WIDTH, f"the page overflows: {seen['width']}, {seen['outside']}"
    assert not seen["outside"]
    assert len(seen["figures"]) == figures
    for tag, name, label, natural, right in seen["figures"]:
        assert len(label) > 25 and label != name.removeprefix("fig-"), (name, label)
        assert tag == "svg" or natural > 0, f"{name} was not decoded"
        assert right <= WIDTH, name
    for _section, _inner, _outer, right in seen["boxes"]:
        assert right <= WIDTH


def _save(page: Path, work: Path, name: str) -> None:
    folder = os.environ.get("SAGO_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        shot = screenshot(page, Path(folder) / name, work)
        assert shot.read_bytes().startswith(b"\x89PNG")


def test_the_report_fits_1280_px_labels_its_figures_and_opens_with_the_headline(
    story_report: Path, tmp_path: Path
) -> None:
    page = story_report
    seen = _probe(page, tmp_path)
    _fits_and_labels(seen, figures=6)
    assert seen["sections"][:2] == ["headline", "story"]
    assert seen["firstH2"] == ["At a glance", "headline"]
    assert seen["sections"].index("pooled") < seen["sections"].index("figures")
    text = page.read_text(encoding="utf-8")
    block = text.split('<section id="headline">', 1)[1].split("</section>", 1)[0]
    assert block.count("<h3>") == 2 and all(m in block for m in MODELS)
    assert "<b>less stable</b> on bleu; equivalent on act; no verdict on ent" in block
    assert "holds no row for this model" in block  # the second model was not compared
    # the tails table is wider than the column: it scrolls in its own box, the page does not
    tails = [b for b in seen["boxes"] if b[0] == "tails"]
    assert tails and all(inner >= outer for _, inner, outer, _ in tails)
    _save(page, tmp_path, "sago-report-1280.png")


def test_the_consistency_page_fits_and_its_checkpoint_table_scrolls_in_its_box(
    tmp_path: Path,
) -> None:
    page = _consistency(tmp_path)
    seen = _probe(page, tmp_path)
    _fits_and_labels(seen, figures=2)
    assert seen["sections"][:4] == ["design", "pairs", "pair-matrix", "series"]
    assert {f[1] for f in seen["figures"]} == {"fig-partial-correlations", "fig-checkpoint-series"}
    (box,) = [b for b in seen["boxes"] if b[0] == "scores"]
    assert box[1] > box[2], "the 24-column checkpoint table should be wider than its box"
    _save(page, tmp_path, "sago-consistency-1280.png")


# After load and the explorer's first page: where the first figure and the first table sit,
# every word of a header or an explorer id cell that wraps onto two lines, every clipped
# header, and whether a scrolled wide table keeps its first column in place.
STORY_PROBE = """<script>window.addEventListener('load',()=>{const ready=window.sagoExplorer?
window.sagoExplorer.ready:Promise.resolve();ready.then(()=>setTimeout(()=>{const out={};try{
const root=document.documentElement;out.width=[window.innerWidth,root.scrollWidth];
const top=e=>Math.round(e.getBoundingClientRect().top+window.scrollY);
const fig=document.querySelector('section img, section svg'),tab=document.querySelector('table');
out.firstFigure=[fig.id,top(fig)];out.firstTable=[tab.closest('section').id,top(tab)];
out.broken=[];out.checked=0;
for(const el of document.querySelectorAll('th, #explorer td.l:not(.txt)')){
  const walk=document.createTreeWalker(el,NodeFilter.SHOW_TEXT);let n;
  while((n=walk.nextNode())){const words=/\\S+/g;let m;while((m=words.exec(n.data))){
    const r=document.createRange();r.setStart(n,m.index);r.setEnd(n,m.index+m[0].length);
    out.checked++;const lines=new Set([...r.getClientRects()].map(x=>Math.round(x.top)));
    if(lines.size>1)out.broken.push(el.tagName+' '+m[0]);}}}
out.clipped=[...document.querySelectorAll('th')].filter(t=>t.scrollWidth>t.clientWidth+1)
  .map(t=>t.textContent);
out.explorerHead=[...document.querySelectorAll('#explorer th')].map(t=>t.textContent);
const box=document.querySelector('#tails .scroll');const cell=box.querySelector('tr>td');
const before=Math.round(cell.getBoundingClientRect().left);box.scrollLeft=200;
out.sticky=[box.scrollWidth>box.clientWidth,box.scrollLeft,before,
  Math.round(cell.getBoundingClientRect().left)];
}catch(e){out.error=String(e)+' '+e.stack;}
document.body.setAttribute('data-probe',JSON.stringify(out));},100));});</script>"""


@pytest.fixture(scope="module")
def story_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _report(tmp_path_factory.mktemp("story"))


@pytest.mark.parametrize("width", [1400, 1000])
def test_the_story_figures_come_before_the_tables_and_no_header_breaks_mid_word(
    story_report: Path, tmp_path: Path, width: int
) -> None:
    text = story_report.read_text(encoding="utf-8")
    seen = probe_json(story_report, STORY_PROBE, "probe", tmp_path, width)
    assert seen["width"][1] <= width, seen["width"]
    assert seen["firstFigure"][0] == "fig-sgs-intervals"
    assert seen["firstFigure"][1] < seen["firstTable"][1], (seen["firstFigure"], seen["firstTable"])
    assert seen["firstTable"][0] == "story" or seen["firstTable"][0] != "headline"
    assert seen["explorerHead"][:2] == ["model", "dataset"]
    assert seen["checked"] > 100 and seen["broken"] == [], seen["broken"][:10]
    assert seen["clipped"] == []
    wide, scrolled, before, after = seen["sticky"]
    assert wide and scrolled > 0 and abs(after - before) <= 2  # the first column stays put
    section_order = re.findall(r'<section id="([^"]+)"', text)
    assert section_order[:2] == ["headline", "story"]
    assert text.index('id="fig-worst-instances"') < text.index('<section id="pooled"')
    assert re.search(r"<td>&lt; 1e-4</td>|<td>\d\.\d{2}|<td>0\.\d{3}", text)
    shots = Path(os.environ.get("SAGO_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    shot = shots / f"sago-report-{width}.png"
    subprocess.run(
        [
            chromium(),
            *FLAGS,
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={shot}",
            f"--window-size={width},4000",
            "--hide-scrollbars",
            story_report.as_uri(),
        ],
        capture_output=True,
        timeout=120,
        check=True,
    )
    assert shot.read_bytes().startswith(b"\x89PNG")
