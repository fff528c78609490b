"""The instance explorer's inline stylesheet and script (no library, no network).

The script decodes the explorer's one data blob (base64 of gzipped columnar JSON, built by
``explorer.py``) with the browser's own ``DecompressionStream``, then draws one page of rows
at a time: filters compare small integer codes, sorting compares numbers as numbers (a
category's codes follow its labels' order, strengths numerically), so 10,000 rows filter and
sort in milliseconds and the DOM never holds more than a page. ``window.sagoExplorer.ready``
resolves once the first page is drawn (tests wait on it; ``openedMs`` is the time since
navigation start).
"""

from __future__ import annotations

# table-layout:fixed, as wide as the page but never narrower than its columns need (the
# script sets each header's width from its name and, for a category, its longest word, and
# the table's min-width from their sum): a narrower window scrolls the table in its own box.
# Headers and numbers never wrap; ids (model, dataset, ...) wrap only after a separator
# (the script puts a <wbr> there), never inside a word; a long answer scrolls in its cell.
STYLE = (
    "#explorer-box{overflow-x:auto;max-width:100%}"
    "#explorer-box tr>:first-child{position:sticky;left:0;z-index:1;background:#fff;"
    "box-shadow:inset -1px 0 0 #ccc}#explorer-box tr>th:first-child{background:#f3f3f3}"
    "#explorer table{table-layout:fixed;width:100%;margin:0.5rem 0 1.5rem}"
    "#explorer th,#explorer td{font-size:0.75rem;padding:0.15rem 0.25rem;vertical-align:top;"
    "overflow:hidden;overflow-wrap:normal;word-break:normal}"
    "#explorer th,#explorer td.n{white-space:nowrap}"
    "#explorer th{cursor:pointer;user-select:none}"
    "#explorer td.txt div{max-height:10em;overflow-y:auto;white-space:pre-wrap;"
    "overflow-wrap:anywhere}"
    "#explorer td.n{font-size:0.7rem;font-variant-numeric:tabular-nums}"
    "#explorer td.sel{background:#fff3c4}"
    "#explorer label{margin-right:0.75rem;white-space:nowrap}"
    "#explorer select{max-width:14rem}"
    "#explorer .pager button{margin:0 0.25rem}"
    "#explorer details label{display:inline-block}"
)

SCRIPT = """
(function(){
const axes=%(axes)s, least={cat:4.5,txt:14,num:4.2};
const SEP=/(?<=[\\/\\-_:.@])/;
const pick=id=>document.getElementById('explorer-'+id);
const fmt=v=>v===null?'NA':(Math.abs(v)<1e-3&&v!==0?v.toExponential(2):v.toFixed(4));
const api=window.sagoExplorer={openedMs:null};
let D=null, kind={};
%(fold_def)sconst state={axis:axes[0],sort:null,desc:false,page:0};
async function load(){
  const raw=atob(pick('data').textContent.trim());
  const out=new Uint8Array(raw.length);
  for(let i=0;i<raw.length;i++)out[i]=raw.charCodeAt(i);
  const stream=new Blob([out]).stream().pipeThrough(new DecompressionStream('gzip'));
  return JSON.parse(await new Response(stream).text());
}
function values(col){
  if(kind[col]==='num')return D.nums[col];
  if(kind[col]==='cat')return D.codes[col].map(c=>c<0?null:c);
  return D.texts[col].map(j=>j<0?null:D.strings[j]);
}
function label(col,i){
  if(kind[col]==='num')return fmt(D.nums[col][i]);
  const j=kind[col]==='cat'?D.codes[col][i]:D.texts[col][i];
  if(j<0)return 'NA';
  return kind[col]==='cat'?D.cats[col][j]:D.strings[j];
}
function matching(){
  const active=[];
  for(const c of D.filters){const v=pick(c).value;if(v==='__any__')continue;
    active.push([D.codes[c],v==='__na__'?-1:D.cats[c].indexOf(v)]);}
  const d=D.nums['d_'+state.axis], rows=[];
  outer:for(let i=0;i<D.n;i++){if(d[i]===null)continue;
    for(const [codes,want] of active)if(codes[i]!==want)continue outer;
    rows.push(i);}
  return rows;
}
function order(rows){
  if(state.sort===null){const d=D.nums['d_'+state.axis];
    rows.sort((a,b)=>Math.abs(d[b])-Math.abs(d[a]));return;}
  const v=values(state.sort), dir=state.desc?-1:1;
  rows.sort((a,b)=>{const x=v[a],y=v[b];
    if(x===null||y===null)return x===null?(y===null?0:1):-1;
    return (x<y?-1:x>y?1:0)*dir;});
}
function shown(){return D.columns.filter(([c])=>pick('show-'+c).checked);}
function words(text){return text.split(SEP).reduce((m,w)=>Math.max(m,w.length),0);}
function rem(c,k){const name=0.5*c.length+1.5;
  const cells=k==='cat'?0.45*D.cats[c].reduce((m,t)=>Math.max(m,words(t)),0)+0.8:0;
  return Math.max(least[k],name,cells);}
function breakable(td,text){text.split(SEP).forEach((w,i)=>{
  if(i)td.appendChild(document.createElement('wbr'));td.appendChild(document.createTextNode(w));});}
function head(cols){
  const tr=document.createElement('tr');
  pick('table').style.minWidth=cols.reduce((s,[c,k])=>s+rem(c,k),0).toFixed(2)+'rem';
  for(const [c,k] of cols){const th=document.createElement('th');th.className='l';
    th.dataset.col=c;th.style.width=k==='txt'?'':rem(c,k).toFixed(2)+'rem';
    th.textContent=c+(state.sort===c?(state.desc?' \\u25bc':' \\u25b2'):'');
    th.title='sort by '+c;th.addEventListener('click',()=>{
      if(state.sort===c)state.desc=!state.desc;else{state.sort=c;state.desc=false;}
      state.page=0;draw();});
    tr.appendChild(th);}
  pick('head').replaceChildren(tr);
}
function draw(){
  const rows=matching();order(rows);
  const size=Number(pick('size').value), pages=Math.max(1,Math.ceil(rows.length/size));
  state.page=Math.min(Math.max(state.page,0),pages-1);
  const start=state.page*size, cols=shown();head(cols);
  const body=pick('rows');body.replaceChildren();
  for(const i of rows.slice(start,start+size)){
    const tr=document.createElement('tr');tr.className='explorer-row';
    for(const [c,k] of cols){const td=document.createElement('td');const text=label(c,i);
      if(k==='txt'){td.className='l txt';const div=document.createElement('div');
        div.textContent=text;td.appendChild(%(fold_call)s);}
      else if(k==='cat'){td.className='l';breakable(td,text);}
      else{td.textContent=text;td.className=c==='d_'+state.axis?'n sel':'n';}
      tr.appendChild(td);}
    body.appendChild(tr);}
  pick('count').textContent=rows.length+' matching variant(s) with a measured '+state.axis+
    ' delta, sorted by '+(state.sort===null?'|d_'+state.axis+'| (largest first)':
    state.sort+(state.desc?' (descending)':' (ascending)'));
  pick('page').textContent=rows.length?'rows '+(start+1)+'-'+
    Math.min(start+size,rows.length)+' of '+rows.length+' (page '+(state.page+1)+' of '+
    pages+')':'no rows';
}
function wire(){
  pick('axis').addEventListener('change',e=>{state.axis=e.target.value;state.sort=null;
    state.page=0;draw();});
  for(const c of D.filters)pick(c).addEventListener('change',()=>{state.page=0;draw();});
  for(const [c] of D.columns)pick('show-'+c).addEventListener('change',draw);
  pick('size').addEventListener('change',()=>{state.page=0;draw();});
  pick('prev').addEventListener('click',()=>{state.page-=1;draw();});
  pick('next').addEventListener('click',()=>{state.page+=1;draw();});
}
api.ready=load().then(data=>{D=data;for(const [c,k] of D.columns)kind[c]=k;
  wire();draw();api.openedMs=performance.now();return api;},
  err=>{pick('count').textContent='The explorer could not decode its data in this '+
    'browser ('+err+'); every variant is in instances.parquet.';throw err;});
})();
"""

# An answer to a harmful request (the rows and columns ``explorer.py`` lists in the data's
# ``folded``) is drawn inside a closed <details> with the report's warning as its summary.
# A page with no such answer gets the script without it, byte for byte as before.
FOLD = """let folded=null;
function fold(c,i,div){
  if(folded===null)folded={rows:new Set(D.folded.rows),cols:new Set(D.folded.columns)};
  if(!folded.rows.has(i)||!folded.cols.has(c))return div;
  const box=document.createElement('details');box.className=D.folded.cls;
  const s=document.createElement('summary');s.textContent=D.folded.warning;
  box.appendChild(s);box.appendChild(div);return box;}
"""
PLAIN_CELLS = {"fold_def": "", "fold_call": "div"}
FOLDED_CELLS = {"fold_def": FOLD, "fold_call": "fold(c,i,div)"}
