"""The consistency page's figures: the pair-by-pair matrix of partial r
with significance marks and readable text, each metric along the checkpoint series (a line
per dataset, labels on every panel). The page itself (figures with their alt texts, the
checkpoint table scrolling in its own box) is checked in Chromium (test_report_browser.py)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from matplotlib.colors import to_rgba

from sago_core.study.report import _draw_heatmap, _draw_series

OODS = ["o1", "o2", "o3"]


def _table() -> pl.DataFrame:
    rows = [
        # family, metric, a, b, r, significant
        ("ft", "loglik", "o1", "o2", 0.9, True),
        ("ft", "loglik", "o1", "o3", 0.05, False),
        ("ft", "loglik", "o2", "o3", None, None),
        ("ft", "acc", "o1", "o2", -0.95, True),
        ("ft", "acc", "o1", "o3", 0.3, False),
        ("ft", "acc", "o2", "o3", 0.0, False),
    ]
    return pl.DataFrame(
        [
            {"series": f, "metric": m, "method": "linear", "ood_a": a, "ood_b": b}
            | {"r": r, "significant": s}
            for f, m, a, b, r, s in rows
        ],
        schema_overrides={"r": pl.Float64, "significant": pl.Boolean},
    )


def _texts(ax: object) -> dict[tuple[int, int], tuple[str, tuple[float, ...]]]:
    """Cell texts by (row, column), with their colour."""
    return {
        (round(t.get_position()[1]), round(t.get_position()[0])): (
            t.get_text(),
            to_rgba(t.get_color()),
        )
        for t in ax.texts  # type: ignore[attr-defined]
    }


def test_the_pair_matrix_marks_significance_and_reads_on_every_cell() -> None:
    figure = _draw_heatmap(_table(), OODS, first_metric="loglik")
    panels = [ax for ax in figure.axes if ax.get_title()]
    assert [ax.get_title() for ax in panels] == ["loglik — ft", "acc — ft"]  # asked-on first
    cells = _texts(panels[0])
    white, dark = to_rgba("white"), to_rgba("#1a1a1a")
    assert cells[(0, 1)] == ("+0.90*", white) and cells[(1, 0)] == ("+0.90*", white)
    assert cells[(0, 2)] == ("+0.05", dark)  # near white on RdBu: dark text
    assert cells[(1, 2)][0] == "NA" and cells[(0, 0)][0] == "—"  # undefined; the diagonal
    acc = _texts(panels[1])
    assert acc[(0, 1)] == ("-0.95*", white) and acc[(1, 2)] == ("+0.00", dark)
    for ax in panels:  # every panel names its datasets on both axes
        assert [t.get_text() for t in ax.get_xticklabels()] == OODS
        assert [t.get_text() for t in ax.get_yticklabels()] == OODS
    assert "* significant (Holm)" in figure._suptitle.get_text()
    assert figure.get_size_inches()[0] <= 10.9  # the page's width


def _scores() -> pl.DataFrame:
    rows = [
        {"series": fam, "position": i, "model": f"{fam}{i}", "dataset": d, "metric": m}
        | {"value": None if (fam, i, d) == ("q", 2, "o1") else float(i + j)}
        for fam in ("ft", "q")
        for m in ("acc", "loglik")
        for j, d in enumerate(["id", *OODS])
        for i in range(4)
    ]
    return pl.DataFrame(rows, schema_overrides={"value": pl.Float64})


def test_each_metric_runs_along_the_checkpoints_one_line_per_dataset() -> None:
    figure = _draw_series(_scores(), "id", first_metric="loglik")
    panels = [ax for ax in figure.axes if ax.get_title()]
    assert [ax.get_title() for ax in panels] == [
        "loglik — ft",
        "loglik — q",
        "acc — ft",
        "acc — q",
    ]
    for ax in panels:
        assert ax.get_xlabel() == "checkpoint (position)" and ax.get_ylabel()
        lines = ax.get_lines()
        assert len(lines) == 4  # id and three OOD datasets
        assert lines[0].get_linestyle() == "--"  # the ID dataset first, dashed
        assert list(lines[2].get_xdata()) == [0, 1, 2, 3]  # o2: value = position + 2
        assert list(lines[2].get_ydata()) == [2.0, 3.0, 4.0, 5.0]
    gap = panels[1].get_lines()[1].get_ydata()  # q, o1: position 2 missing, a gap
    assert np.isnan(gap[2]) and list(gap[[0, 1, 3]]) == [1.0, 2.0, 4.0]
    legend = [t.get_text() for t in figure.legends[0].get_texts()]
    assert legend == ["id (ID)", "o1", "o2", "o3"]


@pytest.mark.parametrize("k", [4, 6])
def test_no_text_of_the_pair_matrix_overlaps_another_with_long_named_datasets(k: int) -> None:
    """Up to four datasets the x names are slanted 45 degrees: their upright bounding boxes
    meet though the letters do not, so tick names are compared only with other texts there."""
    oods = [f"a_long_dataset_name_{i}" for i in range(k)]
    rows = [
        {"series": f, "metric": m, "method": "linear", "ood_a": a, "ood_b": b}
        | {"r": -0.99 + 0.13 * i, "significant": i % 2 == 0}
        for f in ("finetune", "quantize")
        for m in ("ref_loglik", "sgs_act", "sgs_bleu")
        for i, (a, b) in enumerate((a, b) for n, a in enumerate(oods) for b in oods[n + 1 :])
    ]
    figure = _draw_heatmap(pl.DataFrame(rows), oods)
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    texts = [(figure._suptitle, False)]
    for ax in figure.axes:
        texts += [(t, False) for t in (ax.title, ax.xaxis.label, ax.yaxis.label, *ax.texts)]
        texts += [(t, True) for t in (*ax.get_xticklabels(), *ax.get_yticklabels())]
    boxes = [
        (t.get_text(), tick, t.get_window_extent(renderer))
        for t, tick in texts
        if t is not None and t.get_visible() and t.get_text().strip()
    ]
    assert len(boxes) > 6 * k * k  # every cell of the six panels, their titles and ticks
    clashes = [
        (a, b)
        for i, (a, tick_a, x) in enumerate(boxes)
        for b, tick_b, y in boxes[i + 1 :]
        if x.overlaps(y) and not (k <= 4 and tick_a and tick_b)
    ]
    assert not clashes, clashes[:5]
    assert figure.get_size_inches()[0] <= 10.9
    ticks = [t.get_text() for t in figure.axes[0].get_xticklabels()]
    assert len(set(ticks)) == k  # cut in the middle: the ends tell them apart
    assert ticks[0] == ("a_long…_name_0" if k <= 4 else "a_long_d…et_name_0")
