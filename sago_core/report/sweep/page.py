"""The page of a temperature sweep: SGS, or SGS-excess at T > 0, and the
prompt-induced share against temperature, per model, axis and variant family.

One row per (model, arm, axis, family); ``family`` ``__all__`` is the arm's own pooled row of
``summary.parquet`` (every family, datasets pooled), each other family's row is summarised
the same way (``scoring.prompt_scores`` then ``scoring.summary``, datasets pooled) from the
arm's ``deltas.parquet`` restricted to that family and the replay. At T = 0 the number is the
paper's SGS; at T > 0 with K > 1 the arm's deltas are prompt-induced excesses (E = D -
(W_base + W_variant) / 2, ``sampling/excess.py``), so the same summary is SGS-excess; at
T > 0 with one sample there is no within-prompt spread to subtract, and it is the SGS of
sampled answers (``measure`` says which). The prompt-induced share, s2_variant /
(s2_variant + s2_sample), with its band, is read from the arm's pooled row of
``variance_components.parquet`` (every family: that table is not split by family); else it is
NA with the reason (a greedy arm has no sampling variance, one sample per prompt text none
to estimate; an arm without the file, the column or the row says so). Everything is read
from the arms' run folders: no model.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from sago_core.artifacts.layout import (
    DELTAS_FILE,
    SUMMARY_FILE,
    SWEEP_FILE,
    SWEEP_HTML_FILE,
    VARIANCE_COMPONENTS_FILE,
)
from sago_core.artifacts.rows import from_rows
from sago_core.artifacts.schemas import SWEEP, conform
from sago_core.artifacts.store import write_parquet, write_text
from sago_core.report.markup import axis_rank, table
from sago_core.scoring.prompt_scores import score_prompts
from sago_core.scoring.summary import summarize
from sago_core.statistics.tails import ALL_FAMILIES
from sago_core.vocabulary import BASE_FAMILY, POOLED, REPLAY_FAMILY

GREEDY_SHARE = "T = 0: one greedy answer per prompt text, no sampling variance to split"
ONE_SAMPLE_SHARE = "one sample per prompt text: the sample variance is not estimable"


@dataclass(frozen=True)
class ArmRun:
    """A finished arm of a sweep: its temperature, K and run folder."""

    temperature: float
    samples: int
    run_id: str
    run_dir: Path


def family_summary(deltas: pl.DataFrame) -> pl.DataFrame:
    """Pooled SUMMARY rows per variant family, with a ``family`` column: each family's
    deltas (and the replay's, the noise floor) scored and summarised as a whole run is."""
    if deltas.is_empty():
        return pl.DataFrame()
    families = set(deltas["family"].drop_nulls().to_list()) - {REPLAY_FAMILY, BASE_FAMILY}
    frames = []
    for family in sorted(families):
        rows = deltas.filter(pl.col("family").is_in([family, REPLAY_FAMILY]))
        pooled = summarize(score_prompts(rows)).filter(pl.col("dataset") == POOLED)
        frames.append(pooled.with_columns(pl.lit(family).alias("family")))
    return pl.concat(frames) if frames else pl.DataFrame()


def prompt_share(
    variance: pl.DataFrame | None, arm: ArmRun, model: str, axis: str, family: str
) -> dict[str, Any]:
    """The share and its band for one row, or NA with the reason it is missing."""
    keys = ("prompt_share", "prompt_share_ci_low", "prompt_share_ci_high")
    missing = dict.fromkeys((*keys, "prompt_share_ci_missing_reason"))

    def absent(reason: str) -> dict[str, Any]:
        return {**missing, "prompt_share_missing_reason": reason}

    if arm.temperature == 0:
        return absent(GREEDY_SHARE)
    if arm.samples < 2:
        return absent(ONE_SAMPLE_SHARE)
    if family != ALL_FAMILIES:
        return absent(f"{VARIANCE_COMPONENTS_FILE} is not split by family")
    if variance is None:
        return absent(f"the arm's run has no {VARIANCE_COMPONENTS_FILE}")
    wanted = ("model", "dataset", "axis", "share")
    if not set(wanted) <= set(variance.columns):
        return absent(f"{VARIANCE_COMPONENTS_FILE} lacks a column of {list(wanted)}")
    rows = variance.filter(model=model, dataset=POOLED, axis=axis)
    if rows.height != 1:
        return absent(f"{VARIANCE_COMPONENTS_FILE} holds {rows.height} pooled rows for this axis")
    row = rows.row(0, named=True)
    share, low, high = row["share"], row.get("share_ci_low"), row.get("share_ci_high")
    return {
        "prompt_share": share,
        "prompt_share_ci_low": low,
        "prompt_share_ci_high": high,
        "prompt_share_missing_reason": None
        if share is not None
        else row.get("missing_reason") or f"{VARIANCE_COMPONENTS_FILE}: no share",
        "prompt_share_ci_missing_reason": None
        if low is not None and high is not None
        else row.get("ci_missing_reason") or "no interval",
    }


def arm_rows(
    arm: ArmRun,
    summary: pl.DataFrame,
    deltas: pl.DataFrame | None = None,
    variance: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """SWEEP rows of one arm from its summary (the ``__all__`` rows), its deltas (one row
    per family) and its variance components (the share)."""
    pooled = summary.filter(pl.col("dataset") == POOLED).with_columns(
        pl.lit(ALL_FAMILIES).alias("family")
    )
    families = family_summary(deltas) if deltas is not None else pl.DataFrame()
    rows = []
    for r in [*pooled.iter_rows(named=True), *families.iter_rows(named=True)]:
        rows.append(
            {
                "model": r["model"],
                "temperature": arm.temperature,
                "samples": arm.samples,
                "run_id": arm.run_id,
                "axis": r["axis"],
                "family": r["family"],
                "measure": "sgs_excess" if arm.temperature > 0 and arm.samples > 1 else "sgs",
                **{c: r.get(c) for c in ("sgs", "ci_low", "ci_high", "n", "missing_reason")},
                "ci_missing_reason": r.get("ci_missing_reason"),
                **prompt_share(variance, arm, r["model"], r["axis"], r["family"]),
            }
        )
    return from_rows(rows, SWEEP)


def read_arm(arm: ArmRun) -> pl.DataFrame:
    """An arm's rows from its run folder (deltas and variance components when present)."""
    deltas_path = arm.run_dir / DELTAS_FILE
    variance_path = arm.run_dir / VARIANCE_COMPONENTS_FILE
    return arm_rows(
        arm,
        pl.read_parquet(arm.run_dir / SUMMARY_FILE),
        pl.read_parquet(deltas_path) if deltas_path.is_file() else None,
        pl.read_parquet(variance_path) if variance_path.is_file() else None,
    )


def sweep_table(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """Every arm's rows, ordered by model, family (``__all__`` first), axis, temperature."""
    if not frames:
        return pl.DataFrame(schema=SWEEP)
    return (
        pl.concat([conform(f, SWEEP) for f in frames])
        .with_columns(
            (pl.col("family") != ALL_FAMILIES).alias("_later"),
            axis_rank().alias("_axis"),
        )
        .sort("model", "_later", "family", "_axis", "axis", "temperature")
        .drop("_later", "_axis")
    )


def _num(value: Any) -> str:
    return "NA" if value is None else f"{value:.4f}"


def _band(low: Any, high: Any, reason: Any) -> str:
    if low is None or high is None:
        return f"NA ({reason})" if reason else "NA"
    return f"[{low:.4f}, {high:.4f}]"


COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf")
WIDTH, HEIGHT, PAD = 420, 240, 40


# (temperature, value, interval low, interval high); None where NA.
Point = tuple[float, float | None, float | None, float | None]


def line_chart(title: str, points: dict[str, list[Point]]) -> str:
    """An inline SVG: one line per series over temperature, each point with its interval
    as a whisker; a missing value breaks its line (no point is drawn for NA)."""
    xs = [p[0] for series in points.values() for p in series]
    ys = [v for series in points.values() for p in series for v in p[1:] if v is not None]
    if not xs or not ys:
        return f"<p>{html.escape(title)}: no value to draw (every one is NA)</p>"
    x0, x1 = min(xs), max(xs)
    y0 = min(0.0, min(ys))
    y1 = max(ys) if max(ys) > y0 else y0 + 1.0

    def px(x: float) -> float:
        return PAD + (WIDTH - 2 * PAD) * (0.5 if x1 == x0 else (x - x0) / (x1 - x0))

    def py(y: float) -> float:
        return HEIGHT - PAD - (HEIGHT - 2 * PAD) * (y - y0) / (y1 - y0)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'role="img" aria-label="{html.escape(title)}">',
        f'<text x="{PAD}" y="16" font-size="12">{html.escape(title)}</text>',
        f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" y2="{HEIGHT - PAD}" '
        'stroke="#888"/>',
        f'<line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{HEIGHT - PAD}" stroke="#888"/>',
        f'<text x="2" y="{py(y1) + 4:.1f}" font-size="10">{y1:.3g}</text>',
        f'<text x="2" y="{py(y0) + 4:.1f}" font-size="10">{y0:.3g}</text>',
    ]
    for x in sorted(set(xs)):
        parts.append(
            f'<text x="{px(x) - 8:.1f}" y="{HEIGHT - PAD + 14}" font-size="10">T {x:g}</text>'
        )
    for i, (name, series) in enumerate(points.items()):
        colour = COLOURS[i % len(COLOURS)]
        run: list[str] = []
        for x, y, low, high in [*sorted(series, key=lambda p: p[0]), (0.0, None, None, None)]:
            if y is None:
                if len(run) > 1:
                    parts.append(
                        f'<polyline fill="none" stroke="{colour}" points="{" ".join(run)}"/>'
                    )
                run = []
                continue
            run.append(f"{px(x):.1f},{py(y):.1f}")
            parts.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{colour}"/>')
            if low is not None and high is not None:
                parts.append(
                    f'<line x1="{px(x):.1f}" y1="{py(low):.1f}" x2="{px(x):.1f}" '
                    f'y2="{py(high):.1f}" stroke="{colour}" stroke-width="1"/>'
                )
        parts.append(
            f'<text x="{WIDTH - PAD + 4}" y="{PAD + 12 * i}" font-size="10" '
            f'fill="{colour}">{html.escape(name)}</text>'
        )
    return "".join([*parts, "</svg>"])


def _series(frame: pl.DataFrame, value: str, low: str, high: str) -> dict[str, list[Point]]:
    out: dict[str, list[Point]] = {}
    for r in frame.iter_rows(named=True):
        out.setdefault(r["axis"], []).append((r["temperature"], r[value], r[low], r[high]))
    return out


STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:1100px;color:#222}"
    "table{border-collapse:collapse;margin:0.5rem 0 1rem}th,td{border:1px solid #ccc;"
    "padding:0.2rem 0.5rem;font-size:0.85rem;text-align:right}th{background:#f3f3f3}"
    ".l{text-align:left}svg{margin:0 1rem 1rem 0}"
)


def render_sweep(frame: pl.DataFrame, sweep_id: str) -> str:
    """One self-contained page: per model, the curves over temperature (every family) and
    the table of every arm, axis and family."""
    esc = html.escape
    parts = [
        f"<h1>Temperature sweep: {esc(sweep_id)}</h1>",
        "<p>Each temperature is its own run (linked by run id). At T = 0 the number is SGS; "
        "at T &gt; 0 with K &gt; 1 samples it is SGS-excess, the stability score of the "
        "prompt-induced excesses (how far a variant's answers move beyond what resampling the "
        "same prompt already gives; with one sample, the SGS of sampled answers). "
        "Prompt-induced share: s2_variant / (s2_variant + s2_sample), the part of "
        "the answers' variability within a prompt that the wording causes. Datasets "
        "pooled; 95% bootstrap intervals over prompts; NA says why.</p>",
    ]
    for model in frame["model"].unique(maintain_order=True).to_list():
        rows = frame.filter(pl.col("model") == model)
        every = rows.filter(pl.col("family") == ALL_FAMILIES)
        parts += [
            f"<h2>{esc(model)}</h2>",
            line_chart(
                "SGS / SGS-excess, every family", _series(every, "sgs", "ci_low", "ci_high")
            ),
            line_chart(
                "prompt-induced share, every family",
                _series(every, "prompt_share", "prompt_share_ci_low", "prompt_share_ci_high"),
            ),
        ]
        cells = [
            [
                esc(r["family"]),
                esc(r["axis"]),
                f"{r['temperature']:g}",
                str(r["samples"]),
                esc(r["measure"]),
                _num(r["sgs"]) if r["sgs"] is not None else esc(f"NA ({r['missing_reason']})"),
                esc(_band(r["ci_low"], r["ci_high"], r["ci_missing_reason"])),
                str(r["n"]),
                _num(r["prompt_share"]),
                esc(
                    _band(
                        r["prompt_share_ci_low"],
                        r["prompt_share_ci_high"],
                        r["prompt_share_ci_missing_reason"] or r["prompt_share_missing_reason"],
                    )
                ),
                esc(r["run_id"]),
            ]
            for r in rows.iter_rows(named=True)
        ]
        headers = ["family", "axis", "T", "K", "measure", "value", "95% CI", "n"]
        parts.append(table([*headers, "prompt share", "share 95% CI", "run"], cells, left=2))
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>Sweep {esc(sweep_id)}</title><style>{STYLE}</style></head>"
        f"<body>{''.join(parts)}</body></html>"
    )


def write_sweep(sweep_dir: Path, arms: list[ArmRun]) -> tuple[Path, Path]:
    """sweep.parquet and sweep.html in the sweep's folder, from its finished arms."""
    frame = sweep_table([read_arm(arm) for arm in arms])
    data = write_parquet(frame, sweep_dir / SWEEP_FILE, SWEEP)
    page = write_text(render_sweep(frame, sweep_dir.name), sweep_dir / SWEEP_HTML_FILE)
    return data, page
