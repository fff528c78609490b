"""A trend line's chart: pooled SGS per axis, release after release of one family and one
design (``series``), as a Plotly figure (plain JSON, drawn in the browser by the vendored
plotly.js). The x axis says what orders the releases.

Each axis is one line with its 95% bootstrap interval as error bars; an axis whose SGS is NA
in a release leaves a gap (never 0). A release whose paired verdict on an axis against the
release before it is ``b_worse`` (a significant regression: Holm-adjusted paired t-test
rejects, the equivalence test does not; ``statistics/paired.py``) is ringed in red on that
axis's line, in a trace of its own named in the legend.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from sago_core.site.collect import Release, SiteRun
from sago_core.site.series import Series
from sago_core.vocabulary import AXES

# One colour per axis, the same in every family's chart (Okabe-Ito, colour-blind safe).
AXIS_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000")
REGRESSION_COLOUR = "#C00000"
REGRESSION_NAME = "significant regression (paired, vs previous release)"


def release_label(index: int, release: Release, basis: str, sep: str = ", ") -> str:
    """A release as a line shows it: its order on the line, the model's last name, the start
    of its identity (the revision), then its run and the date it is ordered by (two runs of
    one revision differ there). ``sep`` joins the two parts (a chart's tick breaks there)."""
    name = release.spec.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    digest = (release.identity or "").removeprefix("sha256:")
    identity = digest[:7] if re.fullmatch(r"[0-9a-f]{7,}", digest) else ""  # a hash, revision
    head = f"{index + 1}. {name}" + (f" @{identity}" if identity else "")
    at = release.times.get(basis)
    when = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M") if at is not None else ""
    return head + sep + release.run_id + (f" · {when}" if when else "")


def _point(run: SiteRun, spec: str, axis: str) -> dict[str, Any]:
    return next((r for r in run.pooled.get(spec, []) if r["axis"] == axis), {})


def _error(value: Any, bound: Any, sign: int) -> float | None:
    if value is None or bound is None:
        return None
    return max(0.0, sign * (bound - value))


def trend_figure(series: Series, runs: dict[str, SiteRun]) -> dict[str, Any]:
    """The Plotly figure (``data`` and ``layout``) of one line's releases, in release order."""
    releases = series.releases
    labels = [release_label(i, r, series.basis, "<br>") for i, r in enumerate(releases)]
    measured = [
        axis
        for axis in AXES
        if any(_point(runs[r.run_id], r.spec, axis).get("sgs") is not None for r in releases)
    ]
    data: list[dict[str, Any]] = []
    marked: dict[str, list[Any]] = {"x": [], "y": [], "text": []}
    for axis in measured:
        points = [_point(runs[r.run_id], r.spec, axis) for r in releases]
        values = [p.get("sgs") for p in points]
        colour = AXIS_COLOURS[list(AXES).index(axis) % len(AXIS_COLOURS)]
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": axis,
                "x": labels,
                "y": values,
                "line": {"color": colour},
                "marker": {"color": colour, "size": 8},
                "error_y": {
                    "type": "data",
                    "symmetric": False,
                    "array": [
                        _error(v, p.get("ci_high"), 1) for v, p in zip(values, points, strict=True)
                    ],
                    "arrayminus": [
                        _error(v, p.get("ci_low"), -1) for v, p in zip(values, points, strict=True)
                    ],
                    "color": colour,
                    "thickness": 1.2,
                    "width": 4,
                },
                "customdata": [
                    [r.spec, r.run_id, p.get("n")] for r, p in zip(releases, points, strict=True)
                ],
                "hovertemplate": f"<b>{axis}</b> SGS %{{y:.4f}}<br>%{{customdata[0]}}"
                "<br>run %{customdata[1]}, n %{customdata[2]}<extra></extra>",
            }
        )
        for label, release, value in zip(labels, releases, values, strict=True):
            if axis in release.regressions and value is not None:
                row = release.verdicts[axis]
                marked["x"].append(label)
                marked["y"].append(value)
                marked["text"].append(
                    f"{axis}: worse than {release.against_spec} "
                    f"(mean diff {row.get('mean_diff')}, Holm p {row.get('p_holm')})"
                )
    if marked["x"]:
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": REGRESSION_NAME,
                **marked,
                "marker": {
                    "symbol": "circle-open",
                    "size": 20,
                    "color": REGRESSION_COLOUR,
                    "line": {"width": 3, "color": REGRESSION_COLOUR},
                },
                "hovertemplate": "%{text}<extra>regression</extra>",
            }
        )
    notes = [
        {
            "x": x,
            "y": y,
            "text": f"regression: {text.split(':', 1)[0]}",
            "showarrow": True,
            "arrowcolor": REGRESSION_COLOUR,
            "font": {"color": REGRESSION_COLOUR},
            "ax": -40,
            "ay": -30,
        }
        for x, y, text in zip(marked["x"], marked["y"], marked["text"], strict=True)
    ]
    layout = {
        "annotations": notes,
        "xaxis": {
            "title": {"text": f"release, {series.legend}"},
            "type": "category",
            "automargin": True,
        },
        "yaxis": {"title": {"text": "pooled SGS (95% CI)"}, "rangemode": "tozero"},
        "legend": {"orientation": "h", "y": -0.3},
        "margin": {"t": 30, "l": 70, "r": 20, "b": 40},
        "height": 460,
        "template": "none",
    }
    return {"data": data, "layout": layout}
