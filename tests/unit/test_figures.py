"""The report's figures read at the page's width: checked on the matplotlib Figure (text
colours, text boxes that do not overlap, labels present, absent panels not drawn), not pixels."""

from __future__ import annotations

from itertools import combinations
from typing import Any

import matplotlib
import polars as pl
import pytest

from sago_core.report import figures
from sago_core.vocabulary import AXES, POOLED

matplotlib.use("Agg")

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def _close_figures() -> Any:
    yield
    figures._pyplot().close("all")


def _summary() -> pl.DataFrame:
    # one model; "questions" row: 0.0 (viridis' darkest purple) then 1.0 (its lightest yellow)
    rows = []
    for dataset, values in (("questions", (0.0, 1.0)), (POOLED, (0.5, 0.5))):
        for i, axis in enumerate(AXES):
            rows.append(
                {"model": "hf:org/m", "dataset": dataset, "axis": axis, "sgs": values[i % 2]}
            )
    return pl.DataFrame(rows)


def test_heatmap_text_is_dark_on_light_cells_and_white_on_dark_ones() -> None:
    figure = figures._draw_heatmap(_summary())
    ax = figure.axes[0]
    colours = {}
    for text in ax.texts:
        x, y = text.get_position()
        colours[(round(y), round(x))] = matplotlib.colors.to_hex(text.get_color())
    # row 0 = "questions"; column 0 holds 0.0 (dark purple), column 1 holds 1.0 (yellow)
    assert colours[(0, 0)] == "#ffffff"
    assert colours[(0, 1)] == "#1a1a1a"
    assert colours[(0, 0)] != colours[(0, 1)]


@pytest.mark.parametrize(
    ("rgb", "expected"),
    [
        ((0.993, 0.906, 0.144), "#1a1a1a"),  # viridis yellow
        ((0.267, 0.005, 0.329), "white"),  # viridis purple
        ((1.0, 1.0, 1.0), "#1a1a1a"),
        ((0.0, 0.0, 0.0), "white"),
    ],
)
def test_text_colour_by_luminance(rgb: tuple[float, float, float], expected: str) -> None:
    assert figures.text_colour(rgb) == expected


def _scores(models: list[str]) -> pl.DataFrame:
    rows = [
        {"model": m, "axis": axis, "prompt_id": f"p{p}", "s": 0.1 * (i + 1) + 0.01 * p}
        for i, m in enumerate(models)
        for axis in AXES
        for p in range(5)
    ]
    return pl.DataFrame(rows)


def _visible_texts(figure: Any) -> list[Any]:
    texts = [figure._suptitle]
    for ax in figure.axes:
        texts += [ax.title, ax.xaxis.label, ax.yaxis.label, *ax.texts]
        # tick labels the axis draws: the ticks inside the view limits
        for axis, limits in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            low, high = sorted(limits)
            texts += [
                tick.label1
                for tick in axis.get_major_ticks()
                if low - 1e-9 <= tick.get_loc() <= high + 1e-9
            ]
    return [t for t in texts if t is not None and t.get_visible() and t.get_text().strip()]


def test_distributions_text_boxes_do_not_overlap() -> None:
    models = [
        f"hf:/tmp/pytest-of-root/run/families-e2e0/model-with-a-long-name-{i}" for i in range(9)
    ]
    figure = figures._draw_distributions(_scores(models))
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in _visible_texts(figure)]
    assert len(boxes) > len(AXES) * 2
    overlapping = [
        (a, b) for (a, box_a), (b, box_b) in combinations(boxes, 2) if box_a.overlaps(box_b)
    ]
    assert overlapping == []
    # tick labels stay inside the figure
    width, height = figure.canvas.get_width_height()
    for text, box in boxes:
        assert box.x0 >= -1 and box.x1 <= width + 1, text
        assert box.y0 >= -1 and box.y1 <= height + 1, text


def test_short_labels_tell_models_apart() -> None:
    labels = figures.short_labels(["hf:/a/x/m1", "hf:/a/y/m1", "hf:/a/y/m2"])
    assert labels == ["x/m1", "y/m1", "y/m2"]
    assert figures.short_labels(["hf:org/gemma2", "hf:org/opt"]) == ["gemma2", "opt"]


def _deltas(register_strengths: tuple[float, ...], with_noise: bool) -> pl.DataFrame:
    rows = []
    cases = [("register", "politeness", s) for s in register_strengths]
    if with_noise:
        cases += [("noise", "spacing", 5.0)]  # one strength only
    for family, subtype, strength in cases:
        for axis in AXES:
            for position in ("prefix", "suffix"):
                rows.append(
                    {
                        "model": "hf:m",
                        "family": family,
                        "subtype": subtype,
                        "strength": strength,
                        "position": position,
                        "axis": axis,
                        "delta_norm": -0.1 * abs(strength),
                    }
                )
    return pl.DataFrame(rows)


def _panel_titles(figure: Any) -> list[str]:
    return [ax.get_title() for ax in figure.axes if ax.get_title()]


def test_dose_response_draws_only_the_panels_the_run_has_and_names_the_rest() -> None:
    figure = figures._draw_dose_response(_deltas((2.0, 4.0, -2.0), with_noise=True))
    titles = _panel_titles(figure)
    assert [t.split(" (")[0] for t in titles] == [
        "register: politer",
        "register: ruder",
        "noise: spacing",
    ]
    assert len(figure.axes) == len(AXES) * 3
    suptitle = figure._suptitle.get_text()
    for absent in ("noise: punctuation", "noise: capitalization", "structural: length"):
        assert absent in suptitle
    assert "not in this run" not in " ".join(t.get_text() for ax in figure.axes for t in ax.texts)


def test_dose_response_bottom_row_has_an_x_label_in_every_column() -> None:
    figure = figures._draw_dose_response(_deltas((2.0, 4.0, -2.0), with_noise=True))
    grid = figure.axes[0].get_subplotspec().get_gridspec()
    nrows, ncols = grid.get_geometry()
    assert (nrows, ncols) == (len(AXES), 3)
    bottom = [ax for ax in figure.axes if ax.get_subplotspec().is_last_row()]
    assert [ax.get_xlabel() for ax in bottom] == ["level", "level", "strength"]


def test_a_single_strength_family_is_one_labelled_point() -> None:
    figure = figures._draw_dose_response(_deltas((2.0, 4.0), with_noise=True))
    spacing = [ax for ax in figure.axes if ax.get_subplotspec().colspan.start == 1]
    first = spacing[0]
    assert first.get_title().startswith("noise: spacing")
    lines = [line for line in first.get_lines() if line.get_marker() == "o"]
    assert len(lines) == 2  # prefix and suffix
    for line in lines:
        assert list(line.get_xdata()) == [5.0]
        assert list(line.get_ydata()) == pytest.approx([0.5])
    labels = [t.get_text() for t in first.texts]
    assert labels == ["0.5", "0.5"]
    # the x axis shows the one strength, not an empty 0..1 range
    xmin, xmax = first.get_xlim()
    assert xmin < 5.0 < xmax
    # a multi-strength family is a line through its levels, without point labels
    politer = figure.axes[0]
    assert sorted(politer.get_lines()[0].get_xdata()) == [2.0, 4.0]
    assert len(politer.texts) == 0


def test_dose_response_with_no_strength_panels_is_a_note() -> None:
    empty = _deltas((2.0,), with_noise=False).clear()
    figure = figures._draw_dose_response(empty)
    assert figure.axes == []
    assert "not in this run" in figure._suptitle.get_text()


def _analysis() -> pl.DataFrame:
    rows = []
    for model in ("hf:org/a", "hf:org/b"):
        for family in ("register", "noise"):
            rows.append(
                {
                    "model": model,
                    "family": family,
                    "layer_cosines": [0.9, 0.8, 0.7],
                    "layer_cosines_user": [0.95, 0.9, 0.85],
                }
            )
    return pl.DataFrame(rows)


def test_layer_curves_label_every_panel() -> None:
    figure = figures._draw_layer_curves(_analysis())
    assert len(figure.axes) == 4
    for ax in figure.axes:
        assert ax.get_xlabel() == "layer"
        assert ax.get_ylabel() == "mean cos - 1"
        assert ax.get_title()


def test_radar_labels_axes_and_models() -> None:
    deltas = pl.DataFrame(
        [
            {"model": m, "axis": axis, "delta_norm": 0.1}
            for m in ("hf:org/a", "hf:org/b")
            for axis in AXES
        ]
    )
    figure = figures._draw_radar(deltas)
    ax = figure.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == list(AXES)
    assert ax.get_title()
    legend = figure.legends[0]
    assert [t.get_text() for t in legend.get_texts()] == ["a", "b"]


def test_every_public_figure_is_a_png() -> None:
    deltas = _deltas((2.0, -2.0), with_noise=True)
    outputs = [
        figures.radar(deltas),
        figures.heatmap(_summary()),
        figures.dose_response(deltas),
        figures.distributions(_scores(["hf:a", "hf:b"])),
        figures.layer_curves(_analysis()),
    ]
    for png in outputs:
        assert png.startswith(PNG_SIGNATURE)


def test_the_sgs_figure_draws_each_axis_interval_as_the_summary_holds_it_and_na_as_text() -> None:
    from sago_core.report.page.story import draw_sgs_intervals

    rows: list[dict[str, Any]] = [
        {"model": m, "dataset": POOLED, "axis": a, "sgs": None, "ci_low": None, "ci_high": None}
        for m in ("hf:org/a", "hf:org/b")
        for a in AXES
    ]
    rows[1].update(sgs=0.2, ci_low=0.15, ci_high=0.3)  # model a, second axis
    rows[len(AXES)].update(sgs=0.1, ci_low=0.05, ci_high=0.12)  # model b, first axis
    figure = draw_sgs_intervals(pl.DataFrame(rows))
    ax = figure.axes[0]
    bars = {}
    for container in ax.containers:
        (x,), (y,) = container.lines[0].get_data()
        segments = container.lines[2][0].get_segments()
        bars[round(float(y))] = (float(x), segments[0][0][0], segments[0][1][0])
    assert bars[1] == pytest.approx((0.2, 0.15, 0.3))
    assert bars[0] == pytest.approx((0.1, 0.05, 0.12))
    assert [t.get_text() for t in ax.get_yticklabels()] == list(AXES)
    na = [t for t in ax.texts if t.get_text() == "NA"]
    assert len(na) == 2 * len(AXES) - 2
    assert [t.get_text() for t in figure.legends[0].get_texts()] == ["a", "b"]


def test_the_worst_variants_figure_ranks_by_rms_over_the_axes_and_names_the_worst_axis() -> None:
    from sago_core.report.page.story import draw_worst_instances

    def variant(i: int, act: float | None, prob: float | None) -> dict[str, Any]:
        deltas = {f"d_{a}": None for a in AXES} | {"d_act": act, "d_prob": prob}
        return {
            "model": "hf:org/m",
            "dataset": "toy",
            "prompt_id": f"p{i}",
            "variant_id": f"v{i}",
            "family": "register",
            "subtype": "polite",
            "strength": 2.0,
        } | deltas

    rows = [variant(0, 0.3, 0.4), variant(1, -0.6, None), variant(2, 0.1, 0.1)]
    rows += [variant(9, None, None)]  # nothing measured: not ranked
    floats = {f"d_{a}": pl.Float64 for a in AXES}
    figure = draw_worst_instances(pl.DataFrame(rows, schema_overrides=floats))
    ax = figure.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == [
        "toy/p1 · register/polite +2",
        "toy/p0 · register/polite +2",
        "toy/p2 · register/polite +2",
    ]
    widths = [p.get_width() for p in ax.patches]
    assert widths == pytest.approx([0.6, (0.3**2 / 2 + 0.4**2 / 2) ** 0.5, 0.1])
    notes = [t.get_text() for t in ax.texts]
    assert notes[0] == " 0.6 (worst: act 0.6)" and "worst: prob 0.4" in notes[1]
