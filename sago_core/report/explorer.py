"""The report's instance explorer: worst variants you can read, filtered in the page.

For every (model, dataset, axis, family) the ``PER_GROUP`` variants with the largest
|delta_norm| on that axis are embedded as JSON (instances.parquet holds every variant). A
small inline script renders them as one table, sorted by |delta_norm| on the chosen axis,
with filters by model, dataset, family, strength and position: plain HTML, no network, so
the page stays one self-contained offline file. Each row shows the base prompt, the variant,
both answers, all six deltas and the graded mirroring.
"""

from __future__ import annotations

import html
import json

import polars as pl

from sago_core.vocabulary import AXES

PER_GROUP = 5
SHOWN = 25  # rows drawn at once, after filtering
TEXTS = ["base_prompt", "variant_prompt", "base_answer", "variant_answer"]
FILTERS = ("model", "dataset", "family", "strength", "position")

STYLE = (
    "#explorer td.txt{max-width:16rem;white-space:pre-wrap;font-size:0.8rem;"
    "vertical-align:top}#explorer td.sel{background:#fff3c4}#explorer label{margin-right:1rem}"
)
SCRIPT = """
(function(){
const rows=JSON.parse(document.getElementById('explorer-data').textContent);
const axes=%(axes)s, filters=%(filters)s, shown=%(shown)d;
const body=document.getElementById('explorer-rows');
const pick=id=>document.getElementById('explorer-'+id);
function cell(text,cls){const td=document.createElement('td');
  td.textContent=text===null?'NA':text;if(cls)td.className=cls;return td;}
function num(v){return v===null?'NA':(Math.abs(v)<1e-3&&v!==0?v.toExponential(2):v.toFixed(4));}
function draw(){
  const axis=pick('axis').value;
  const chosen=rows.filter(r=>filters.every(f=>{const v=pick(f).value;
    return v==='__any__'||String(r[f])===v;})&&r['d_'+axis]!==null);
  chosen.sort((a,b)=>Math.abs(b['d_'+axis])-Math.abs(a['d_'+axis]));
  body.replaceChildren();
  for(const r of chosen.slice(0,shown)){
    const tr=document.createElement('tr');tr.className='explorer-row';
    for(const f of filters)tr.appendChild(cell(String(r[f]),'l'));
    for(const t of %(texts)s)tr.appendChild(cell(r[t],'l txt'));
    for(const a of axes){const td=cell(num(r['d_'+a]));if(a===axis)td.className='sel';
      tr.appendChild(td);}
    tr.appendChild(cell(num(r.mr_intensity)));
    body.appendChild(tr);}
  pick('count').textContent=chosen.length+' matching variant(s) with a measured '+axis+
    ' delta, the '+Math.min(chosen.length,shown)+' largest |delta_norm| shown';
}
for(const f of ['axis',...filters])pick(f).addEventListener('change',draw);
draw();
})();
"""


def worst_rows(instances: pl.DataFrame, per_group: int = PER_GROUP) -> pl.DataFrame:
    """The union over axes of the ``per_group`` largest |d_<axis>| per (model, dataset,
    family): the rows the page embeds."""
    key = ["model", "dataset", "family"]
    picked = []
    for axis in AXES:
        column = f"d_{axis}"
        ranked = instances.drop_nulls(column).with_columns(
            pl.col(column).abs().rank("ordinal", descending=True).over(key).alias("_rank")
        )
        picked.append(ranked.filter(pl.col("_rank") <= per_group).drop("_rank"))
    rows = pl.concat(picked) if picked else instances.clear()
    return rows.unique(["model", "dataset", "prompt_id", "variant_id"], maintain_order=True)


def _options(name: str, values: list[str]) -> str:
    options = '<option value="__any__">any</option>' + "".join(
        f'<option value="{html.escape(v)}">{html.escape(v)}</option>' for v in values
    )
    return f'<label>{name} <select id="explorer-{name}">{options}</select></label> '


def _strength(value: float | None) -> str:
    if value is None:
        return "None"
    return str(int(value)) if float(value).is_integer() else str(value)


def explorer_section(instances: pl.DataFrame) -> str:
    rows = worst_rows(instances)
    if not len(rows):
        return "<p>No variant has a measured delta: nothing to explore.</p>"
    records = [
        {
            **{f: str(r[f]) for f in FILTERS if f != "strength"},
            "strength": _strength(r["strength"]),
            **{t: r[t] for t in TEXTS},
            **{f"d_{a}": r[f"d_{a}"] for a in AXES},
            "mr_intensity": r["mr_intensity"],
        }
        for r in rows.iter_rows(named=True)
    ]
    choices = {f: sorted({rec[f] for rec in records}) for f in FILTERS}
    axis_options = "".join(f'<option value="{a}">{a}</option>' for a in AXES)
    controls = f'<label>axis <select id="explorer-axis">{axis_options}</select></label> ' + "".join(
        _options(f, choices[f]) for f in FILTERS
    )
    headers = [*FILTERS, *TEXTS, *(f"d_{a}" for a in AXES), "mr_intensity"]
    head = "".join(f'<th class="l">{h}</th>' for h in headers)
    # no "<" in the element, so no text can end the script early ("<" is only in strings)
    data = json.dumps(records, ensure_ascii=True).replace("<", "\\u003c")
    script = SCRIPT % {
        "axes": json.dumps(list(AXES)),
        "filters": json.dumps(list(FILTERS)),
        "texts": json.dumps(TEXTS),
        "shown": SHOWN,
    }
    return (
        f"<style>{STYLE}</style>"
        f"<p>The {PER_GROUP} variants with the largest |delta_norm| per model, dataset, axis "
        "and family (every variant is in <code>instances.parquet</code>), sorted by the chosen "
        "axis. d_* are normalised deltas; mr_intensity is the graded mirroring in [0, 1].</p>"
        f'<div id="explorer">{controls}<p id="explorer-count"></p>'
        f'<table id="explorer-table"><thead><tr>{head}</tr></thead>'
        '<tbody id="explorer-rows"></tbody></table></div>'
        f'<script type="application/json" id="explorer-data">{data}</script>'
        f"<script>{script}</script>"
    )
