"""The instance explorer with a run's kinds: answers to harmful requests are folded behind
the refusal section's warning (in the data, and as Chromium draws them), ``kind`` is a
filter, and a run without kinds gets the page it always got, byte for byte."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from sago_core.data.safety import HARMFUL, HARMLESS
from sago_core.report.page.html import STYLE
from sago_core.report.sections.explorer import explorer_section
from sago_core.report.sections.insights import Insights, detail_sections
from sago_core.report.sections.refusal import UNSAFE_CLASS, UNSAFE_WARNING
from sago_core.site.redact import REDACTED, redact_page
from tests.browser import probe_json
from tests.unit.test_explorer import _blob, synthetic_instances

ROWS = 160  # synthetic_instances: rows 0-79 are prompt p0, rows 80-159 prompt p1


def _prompts(instances: pl.DataFrame, kind_of: dict[str, str | None] | None) -> pl.DataFrame:
    """prompts.parquet's key for every instance's prompt; a ``kind`` column from
    ``kind_of`` (prompt_id -> kind), none when ``kind_of`` is None."""
    prompts = instances.select("dataset", "prompt_id").unique(maintain_order=True)
    if kind_of is None:
        return prompts
    kinds = [kind_of[p] for p in prompts["prompt_id"].to_list()]
    return prompts.with_columns(pl.Series("kind", kinds, dtype=pl.String))


def test_a_run_without_kinds_gets_the_same_page() -> None:
    instances = synthetic_instances(ROWS)
    page = explorer_section(instances)
    assert explorer_section(instances, _prompts(instances, None)) == page
    assert explorer_section(instances, _prompts(instances, {"p0": None, "p1": None})) == page
    assert "fold(" not in page and "explorer-kind" not in page
    assert "folded" not in _blob(page)


def test_answers_to_harmful_requests_are_folded_in_the_data() -> None:
    instances = synthetic_instances(ROWS)
    page = explorer_section(instances, _prompts(instances, {"p0": HARMFUL, "p1": HARMLESS}))
    data = _blob(page)
    assert data["folded"] == {
        "rows": list(range(80)),  # every variant of p0, and only those
        "columns": ["base_answer", "variant_answer"],
        "warning": UNSAFE_WARNING,
        "cls": UNSAFE_CLASS,
    }
    assert data["cats"]["kind"] == [HARMFUL, HARMLESS]
    assert data["codes"]["kind"] == [0] * 80 + [1] * 80
    assert '<select id="explorer-kind">' in page
    assert "fold(c,i,div)" in page and "folded behind a warning" in page
    # the prompts stay as they were; the answers are still in the blob (folded, not dropped)
    assert data["strings"] == _blob(explorer_section(instances))["strings"]


def test_the_report_passes_its_prompts_to_the_explorer() -> None:
    instances = synthetic_instances(ROWS)
    prompts = _prompts(instances, {"p0": HARMFUL, "p1": HARMLESS})
    # the graded-mirroring section beside the explorer reads its reason column
    instances = instances.with_columns(pl.lit(None, pl.String).alias("mr_intensity_reason"))
    sections = {s.key: s.body for s in detail_sections(Insights(instances), prompts)}
    assert _blob(sections["instances"])["folded"]["rows"] == list(range(80))


def test_harmless_kinds_alone_fold_nothing() -> None:
    instances = synthetic_instances(ROWS)
    page = explorer_section(instances, _prompts(instances, {"p0": HARMLESS, "p1": None}))
    data = _blob(page)
    assert "folded" not in data and "fold(" not in page
    assert data["cats"]["kind"] == [HARMLESS]
    assert data["codes"]["kind"] == [0] * 80 + [-1] * 80


def test_the_site_redacts_the_folded_answers() -> None:
    instances = synthetic_instances(ROWS)
    page = explorer_section(instances, _prompts(instances, {"p0": HARMFUL, "p1": HARMLESS}))
    harmful = frozenset(
        instances.filter(pl.col("prompt_id") == "p0")
        .select(pl.concat_list("base_answer", "variant_answer").explode())
        .to_series()
        .to_list()
    )
    data = _blob(redact_page(page.encode(), harmful).decode())
    assert "folded" in data
    base = [data["strings"][j] for j in data["texts"]["base_answer"]]
    assert base[:80] == [REDACTED] * 80
    assert REDACTED not in base[80:]


# After the first page is drawn: per row, the kind cell and, per answer cell, whether it is
# folded (class, open, summary) and the text inside; then the same under each kind filter.
PROBE = """<script>window.addEventListener('load',async()=>{const out={};try{
await window.sagoExplorer.ready;
const cols=[...document.querySelectorAll('#explorer-head th')].map(th=>th.dataset.col);
const read=()=>[...document.querySelectorAll('#explorer-rows tr')].map(tr=>{
  const cell=c=>tr.children[cols.indexOf(c)];
  const answer=c=>{const d=cell(c).querySelector('details');
    return d?[d.className,d.open,d.querySelector('summary').textContent,
      d.querySelector('div').textContent]:[null,null,null,cell(c).textContent];};
  return [cell('kind').textContent,answer('base_answer'),answer('variant_answer')];});
const set=v=>{const s=document.getElementById('explorer-kind');s.value=v;
  s.dispatchEvent(new Event('change'));};
out.all=read();set('harmful');out.harmful=read();set('harmless');out.harmless=read();
}catch(e){out.error=String(e)+' '+e.stack;}
document.body.setAttribute('data-explorer',JSON.stringify(out));});</script>"""


@pytest.mark.slow  # a browser
def test_chromium_draws_harmful_answers_folded(tmp_path: Path) -> None:
    instances = synthetic_instances(ROWS)
    section = explorer_section(instances, _prompts(instances, {"p0": HARMFUL, "p1": HARMLESS}))
    page = tmp_path / "explorer.html"
    page.write_text(
        f'<!doctype html><html><head><meta charset="utf-8"><style>{STYLE}</style></head>'
        f"<body>{section}</body></html>",
        encoding="utf-8",
    )
    seen = probe_json(page, PROBE, "explorer", tmp_path)
    answers = {
        (r["base_answer"], r["variant_answer"]): r["prompt_id"]
        for r in instances.iter_rows(named=True)
    }
    assert {kind for kind, _, _ in seen["all"]} == {HARMFUL, HARMLESS}  # both on page one
    runs = ((seen["all"], None), (seen["harmful"], HARMFUL), (seen["harmless"], HARMLESS))
    for rows, want in runs:
        assert len(rows) == 25
        for kind, base, variant in rows:
            assert want is None or kind == want
            assert answers[(base[3], variant[3])] == ("p0" if kind == HARMFUL else "p1")
            folded = [UNSAFE_CLASS, False, UNSAFE_WARNING]
            expected = folded if kind == HARMFUL else [None, None, None]
            assert base[:3] == expected and variant[:3] == expected
