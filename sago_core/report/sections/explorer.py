"""The report's instance explorer: every variant you can read, filtered and sorted in the page.

Every variant of instances.parquet (up to ``MAX_ROWS``; beyond, the ``PER_GROUP`` with the
largest |delta_norm| per model, dataset, axis and family) is embedded once, as one compact
blob: columnar JSON (categories as codes into sorted labels, each distinct text stored once,
numbers to ``DIGITS`` significant digits), gzipped and base64-encoded. An inline script
(``explorer_script.py``) decodes it and draws one page of rows at a time, sorted by
|delta_norm| on the chosen axis or by any column (numbers as numbers), filtered by model,
dataset, family, subtype, strength, position and language (when the instances carry one),
with a column chooser; the table wraps to the page's width. Plain HTML, no network: the page
stays one self-contained offline file. Each row shows the base prompt, the variant, both
answers, all six deltas and the graded mirroring.

When the run's prompts carry a kind (``data/safety.py``), ``kind`` is a filter and a column,
and the answers (base and variant) to a harmful request are drawn folded behind the
refusal section's warning (``sections.refusal.UNSAFE_WARNING``), as that section folds them;
``sago site --redact-unsafe`` replaces their texts in the blob. A run without kinds gets
the page it got before, byte for byte.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
from typing import Any

import polars as pl

from sago_core.axes.language_fidelity import prompt_language
from sago_core.data.safety import HARMFUL
from sago_core.report.sections.explorer_script import FOLDED_CELLS, PLAIN_CELLS, SCRIPT, STYLE
from sago_core.report.sections.refusal import UNSAFE_CLASS, UNSAFE_WARNING
from sago_core.vocabulary import AXES, LANGUAGE_FAMILY, ROW_KEY

PER_GROUP = 5
MAX_ROWS = 25_000  # every variant of about three paper-size models; beyond, the worst ones
PAGE_SIZES = (25, 50, 100)
DIGITS = 6  # significant digits kept of each number (the table shows four decimals)
CATEGORIES = ("model", "dataset", "family", "subtype", "strength", "position")
OPTIONAL_CATEGORIES = ("language", "kind")  # a filter and a column only where carried
TEXTS = ("base_prompt", "variant_prompt", "base_answer", "variant_answer")
FOLDED_TEXTS = ("base_answer", "variant_answer")  # folded for a harmful request
ANY, NULL = "__any__", "__na__"


def worst_rows(instances: pl.DataFrame, per_group: int = PER_GROUP) -> pl.DataFrame:
    """The union over axes of the ``per_group`` largest |d_<axis>| per (model, dataset,
    family): the rows the page embeds when the run holds more than ``MAX_ROWS`` variants."""
    key = ["model", "dataset", "family"]
    picked = []
    for axis in AXES:
        column = f"d_{axis}"
        ranked = instances.drop_nulls(column).with_columns(
            pl.col(column).abs().rank("ordinal", descending=True).over(key).alias("_rank")
        )
        picked.append(ranked.filter(pl.col("_rank") <= per_group).drop("_rank"))
    rows = pl.concat(picked) if picked else instances.clear()
    return rows.unique(ROW_KEY, maintain_order=True)


def explorer_rows(instances: pl.DataFrame, max_rows: int = MAX_ROWS) -> pl.DataFrame:
    """The variants the page embeds: all of them, or the worst when there are too many."""
    return instances if len(instances) <= max_rows else worst_rows(instances)


def numbers() -> list[str]:
    return [*(f"d_{a}" for a in AXES), "mr_intensity"]


def categories(instances: pl.DataFrame) -> list[str]:
    return [*CATEGORIES, *(c for c in OPTIONAL_CATEGORIES if c in instances.columns)]


def _strength(value: float | None) -> str | None:
    if value is None:
        return None
    return str(int(value)) if float(value).is_integer() else str(value)


def _labels(rows: pl.DataFrame, column: str) -> tuple[list[str], list[str | None]]:
    """The column's sorted distinct labels (strengths in numeric order) and each row's."""
    if column == "strength":
        values = rows[column].cast(pl.Float64).to_list()
        distinct = sorted({v for v in values if v is not None})
        return [str(_strength(v)) for v in distinct], [_strength(v) for v in values]
    cells = [None if v is None else str(v) for v in rows[column].to_list()]
    return sorted({v for v in cells if v is not None}), cells


def _round(value: float | None) -> float | None:
    return None if value is None else float(f"{value:.{DIGITS}g}")


def explorer_data(rows: pl.DataFrame) -> dict[str, Any]:
    """The columnar record the script reads: ``codes`` index ``cats`` (-1: null), ``texts``
    index ``strings`` (-1: null), ``nums`` hold the numbers (null: not measured)."""
    cats, codes = {}, {}
    for column in categories(rows):
        labels, cells = _labels(rows, column)
        index = {label: i for i, label in enumerate(labels)}
        cats[column] = labels
        codes[column] = [-1 if c is None else index[c] for c in cells]
    strings: dict[str, int] = {}
    texts = {
        column: [-1 if t is None else strings.setdefault(t, len(strings)) for t in rows[column]]
        for column in TEXTS
    }
    nums = {column: [_round(v) for v in rows[column].to_list()] for column in numbers()}
    harmful = (
        [i for i, kind in enumerate(rows["kind"].to_list()) if kind == HARMFUL]
        if "kind" in rows.columns
        else []
    )
    folded = {"rows": harmful, "columns": list(FOLDED_TEXTS), "warning": UNSAFE_WARNING}
    columns = [
        *([c, "cat"] for c in cats),
        *([t, "txt"] for t in TEXTS),
        *([n, "num"] for n in nums),
    ]
    return {
        "n": len(rows),
        "columns": columns,
        "filters": list(cats),
        "cats": cats,
        "codes": codes,
        "strings": list(strings),
        "texts": texts,
        "nums": nums,
        **({"folded": {**folded, "cls": UNSAFE_CLASS}} if harmful else {}),
    }


def pack(data: dict[str, Any]) -> str:
    """base64(gzip(JSON)): ASCII with no "<", so it cannot end its script element early."""
    raw = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    # level 3: within 3% of level 6's size at a quarter of its time (10,000 paper-like rows)
    return base64.b64encode(gzip.compress(raw, compresslevel=3, mtime=0)).decode("ascii")


def unpack(blob: str) -> dict[str, Any]:
    """The inverse of ``pack`` (what the page's script does)."""
    data: dict[str, Any] = json.loads(gzip.decompress(base64.b64decode(blob)))
    return data


def _select(name: str, labels: list[str], has_null: bool) -> str:
    options = [(ANY, "any"), *((v, v) for v in labels), *([(NULL, "NA")] if has_null else [])]
    body = "".join(
        f'<option value="{html.escape(v)}">{html.escape(text)}</option>' for v, text in options
    )
    return f'<label>{name} <select id="explorer-{name}">{body}</select></label>'


def _controls(data: dict[str, Any]) -> str:
    axis = "".join(f'<option value="{a}">{a}</option>' for a in AXES)
    filters = "".join(_select(c, data["cats"][c], -1 in data["codes"][c]) for c in data["filters"])
    chooser = "".join(
        f'<label><input type="checkbox" id="explorer-show-{c}" checked> {c}</label>'
        for c, _ in data["columns"]
    )
    sizes = "".join(f'<option value="{s}">{s}</option>' for s in PAGE_SIZES)
    return (
        f'<div class="controls"><label>axis <select id="explorer-axis">{axis}</select></label>'
        f"{filters}</div>"
        f"<details><summary>columns shown</summary>{chooser}</details>"
        '<p id="explorer-count">Loading the explorer (it needs JavaScript)...</p>'
        '<p class="pager"><button type="button" id="explorer-prev">previous</button>'
        '<button type="button" id="explorer-next">next</button> '
        '<span id="explorer-page"></span> '
        f'<label>rows per page <select id="explorer-size">{sizes}</select></label></p>'
    )


def with_language(instances: pl.DataFrame) -> pl.DataFrame:
    """The instances with a ``language`` column (the prompt's language,
    ``language_fidelity.prompt_language``: a language variant's code, else the base one)
    when the run holds language variants; as they are otherwise, or when they carry the
    column already."""
    if "language" in instances.columns or "family" not in instances.columns:
        return instances
    if not len(instances.filter(pl.col("family") == LANGUAGE_FAMILY)):
        return instances
    return instances.with_columns(prompt_language().alias("language"))


def with_kind(instances: pl.DataFrame, prompts: pl.DataFrame | None) -> pl.DataFrame:
    """The instances with the prompt's ``kind`` (prompts.parquet's, ``data/safety.py``) when
    some prompt has one; as they are otherwise, or when they carry the column already."""
    if prompts is None or "kind" not in prompts.columns or "kind" in instances.columns:
        return instances
    key = ["dataset", "prompt_id"]
    kinds = prompts.filter(pl.col("kind").is_not_null()).select(*key, "kind").unique(key)
    if kinds.is_empty():
        return instances
    return instances.join(kinds, on=key, how="left", maintain_order="left")


def explorer_section(instances: pl.DataFrame, prompts: pl.DataFrame | None = None) -> str:
    """``prompts`` (prompts.parquet) gives each variant its prompt's kind, when it has one."""
    instances = with_kind(with_language(instances), prompts)
    rows = explorer_rows(instances)
    if not len(rows.filter(pl.any_horizontal(pl.col(numbers()[:-1]).is_not_null()))):
        return "<p>No variant has a measured delta: nothing to explore.</p>"
    data = explorer_data(rows)
    if len(rows) == len(instances):
        which = f"All {len(rows)} variants of the run"
    else:
        which = (
            f"The run holds {len(instances)} variants, more than the page embeds "
            f"({MAX_ROWS}): the {PER_GROUP} with the largest |delta_norm| per model, dataset, "
            f"axis and family ({len(rows)})"
        )
    cells = FOLDED_CELLS if "folded" in data else PLAIN_CELLS
    script = SCRIPT % {"axes": json.dumps(list(AXES)), **cells}
    folded = (
        " Answers to harmful requests are folded behind a warning: open one to read it."
        if "folded" in data
        else ""
    )
    return (
        f"<style>{STYLE}</style>"
        f"<p>{which}, sorted by |delta_norm| on the chosen axis; click a column's header to "
        "sort by it (again to reverse), choose the columns shown below the filters. d_* are "
        "normalised deltas; mr_intensity is the graded mirroring in [0, 1]; every variant is "
        f"in <code>instances.parquet</code>.{folded}</p>"
        f'<div id="explorer">{_controls(data)}'
        '<div id="explorer-box"><table id="explorer-table"><thead id="explorer-head"></thead>'
        '<tbody id="explorer-rows"></tbody></table></div></div>'
        f'<script type="text/plain" id="explorer-data">{pack(data)}</script>'
        f"<script>{script}</script>"
    )
