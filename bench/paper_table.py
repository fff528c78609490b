"""The arithmetic of ``make bench-paper``: per-stage rows from a run's stage records, the
ratios against the raw engines, the post-scoring share and the scale curve's exponents.

Pure (no model, no file): the records, memory samples and raw timings come in as plain
values, so every number printed can be checked by hand (tests/test_bench_paper_table.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

# The stages the ratios compare (stage names of flows/evaluate.py's records).
GENERATE = "generate"
SCORING_PASS = "analyse"
BERTSCORE = "score-pairs"
# Scoring stages that run after the scoring pass but are not post-scoring stages:
# BERTScore has a ratio of its own, and mirroring is the judge's (or the rules') stage.
NOT_POST_SCORING = frozenset({BERTSCORE, "detect-mirroring"})
TARGETS = {"generation": 0.9, "scoring pass": 0.8, "BERTScore": 0.9}
POST_SCORING_TARGET = 0.05


@dataclass(frozen=True)
class StageRecord:
    """One record of the run manifest's ``stages``: ``ended`` is its artifact's mtime
    (seconds since the epoch), so the stage ran in [ended - seconds, ended]."""

    stage: str
    seconds: float | None
    rows: int | None
    bytes: int
    ended: float
    tokens: int | None = None


@dataclass(frozen=True)
class StageRow:
    stage: str
    records: int
    seconds: float
    items: int | None
    tokens: int | None
    peak_rss_mib: float | None
    bytes: int
    first_seconds: float = 0.0  # the first record's (the shard that pays one-off loads)

    @property
    def steady_seconds(self) -> float | None:
        """Seconds without the first record; None for a stage recorded once."""
        return self.seconds - self.first_seconds if self.records > 1 else None

    @property
    def items_per_s(self) -> float | None:
        return rate(self.items, self.seconds)

    @property
    def tokens_per_s(self) -> float | None:
        return rate(self.tokens, self.seconds)


def rate(amount: float | None, seconds: float | None) -> float | None:
    """``amount`` per second; None when either is missing or the time is not positive."""
    if amount is None or seconds is None or seconds <= 0:
        return None
    return amount / seconds


def peak_between(samples: Sequence[tuple[float, float]], start: float, end: float) -> float | None:
    """Largest memory sample (time, MiB) taken in [start, end]; None when none was."""
    inside = [mib for t, mib in samples if start <= t <= end]
    return max(inside) if inside else None


def stage_rows(
    records: Sequence[StageRecord], samples: Sequence[tuple[float, float]]
) -> list[StageRow]:
    """One row per stage name, in order of first appearance: records summed (a stage run per
    shard has several), peak memory over all of its records' windows."""
    order: list[str] = []
    grouped: dict[str, list[StageRecord]] = {}
    for record in records:
        if record.stage not in grouped:
            order.append(record.stage)
        grouped.setdefault(record.stage, []).append(record)
    rows = []
    for stage in order:
        group = grouped[stage]
        peaks = [
            p
            for r in group
            if r.seconds is not None
            and (p := peak_between(samples, r.ended - r.seconds, r.ended)) is not None
        ]
        items = [r.rows for r in group if r.rows is not None]
        tokens = [r.tokens for r in group if r.tokens is not None]
        rows.append(
            StageRow(
                stage=stage,
                records=len(group),
                seconds=sum(r.seconds or 0.0 for r in group),
                items=sum(items) if items else None,
                tokens=sum(tokens) if tokens else None,
                peak_rss_mib=max(peaks) if peaks else None,
                bytes=sum(r.bytes for r in group),
                first_seconds=group[0].seconds or 0.0,
            )
        )
    return rows


def post_scoring_seconds(records: Sequence[StageRecord]) -> float:
    """Seconds of every stage recorded after the last scoring-pass record (deltas, summary,
    instances, tails, axis structure, report, explorer, card...), BERTScore and mirroring
    left out."""
    last = max((i for i, r in enumerate(records) if r.stage == SCORING_PASS), default=-1)
    return sum(r.seconds or 0.0 for r in records[last + 1 :] if r.stage not in NOT_POST_SCORING)


def steady_rate(records: Sequence[StageRecord], stage: str) -> float | None:
    """Tokens/s of ``stage`` without its first record (the shard that pays one-off loads:
    the engine's start, the scorer's weights); None with fewer than two records."""
    group = [r for r in records if r.stage == stage]
    rest = group[1:]
    if not rest or any(r.tokens is None for r in rest):
        return None
    return rate(sum(r.tokens or 0 for r in rest), sum(r.seconds or 0.0 for r in rest))


@dataclass(frozen=True)
class Ratio:
    """sago's rate over the raw engine's on the same inputs (higher is better)."""

    name: str
    unit: str
    sago: float | None
    raw: float | None
    steady_sago: float | None = None  # one-off loads left out

    @property
    def value(self) -> float | None:
        return None if self.sago is None or not self.raw else self.sago / self.raw

    @property
    def steady(self) -> float | None:
        return None if self.steady_sago is None or not self.raw else self.steady_sago / self.raw

    @property
    def target(self) -> float:
        return TARGETS[self.name]


def loglog_exponent(sizes: Sequence[float], seconds: Sequence[float]) -> float | None:
    """Least-squares slope of log(seconds) on log(size): 1 is linear, 2 quadratic. None with
    fewer than two distinct sizes or a time that is not positive."""
    points = [(math.log(x), math.log(y)) for x, y in zip(sizes, seconds, strict=True) if y > 0]
    if len({x for x, _ in points}) < 2 or len(points) != len(sizes):
        return None
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    sxx = sum((x - mx) ** 2 for x, _ in points)
    sxy = sum((x - mx) * (y - my) for x, y in points)
    return sxy / sxx


def memory_growth(peaks: Sequence[float | None]) -> float | None:
    """Largest peak over the smallest, minus 1 (0.08: 8% more); None if one is missing."""
    known = [p for p in peaks if p is not None]
    if not known or len(known) != len(peaks) or min(known) <= 0:
        return None
    return max(known) / min(known) - 1


def _num(value: float | None, digits: int = 1) -> str:
    return "NA" if value is None else f"{value:,.{digits}f}"


def _pct(share: float | None, sign: str = "") -> str:
    """A share (0.05) as a percentage ("5.0%"); NA when missing."""
    return "NA" if share is None else f"{100 * share:{sign}.1f}%"


def _mib(n_bytes: int) -> str:
    return f"{n_bytes / 2**20:,.2f}"


def stage_table(rows: Sequence[StageRow], total_seconds: float) -> list[str]:
    """The per-stage table (markdown, so the same text goes into the docs)."""
    lines = [
        "| stage | records | wall s | share | items | items/s | tokens/s | peak RSS MiB "
        "| artifact MiB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        share = r.seconds / total_seconds if total_seconds > 0 else None
        lines.append(
            f"| {r.stage} | {r.records} | {_num(r.seconds)} | {_pct(share)} "
            f"| {'NA' if r.items is None else r.items} | {_num(r.items_per_s)} "
            f"| {_num(r.tokens_per_s)} | {_num(r.peak_rss_mib, 0)} | {_mib(r.bytes)} |"
        )
    staged = sum(r.seconds for r in rows)
    peaks = [r.peak_rss_mib for r in rows if r.peak_rss_mib is not None]
    lines.append(
        f"| all stages | {sum(r.records for r in rows)} | {_num(staged)} "
        f"| {_pct(staged / total_seconds if total_seconds > 0 else None)} | | | "
        f"| {_num(max(peaks) if peaks else None, 0)} "
        f"| {_mib(sum(r.bytes for r in rows))} |"
    )
    return lines


def verdict(value: float | None, target: float, at_most: bool = False) -> str:
    if value is None:
        return "not measured"
    met = value <= target if at_most else value >= target
    return "met" if met else "MISSED"


def ratio_table(ratios: Sequence[Ratio], post_seconds: float, total_seconds: float) -> list[str]:
    lines = [
        "| ratio | sago | raw | sago/raw | without one-off loads | target | verdict |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in ratios:
        best = r.steady if r.steady is not None else r.value
        lines.append(
            f"| {r.name} ({r.unit}) | {_num(r.sago)} | {_num(r.raw)} | {_num(r.value, 3)} "
            f"| {_num(r.steady, 3)} | >= {r.target} | {verdict(best, r.target)} |"
        )
    share = post_seconds / total_seconds if total_seconds > 0 else None
    lines.append(
        f"| after the scoring pass (share of the run) | {_num(post_seconds)} s "
        f"| {_num(total_seconds)} s | {_pct(share)} | "
        f"| <= {100 * POST_SCORING_TARGET:.0f}% "
        f"| {verdict(share, POST_SCORING_TARGET, at_most=True)} |"
    )
    return lines


def scale_table(
    sizes: Sequence[int], runs: Sequence[Sequence[StageRow]], total_seconds: Sequence[float]
) -> list[str]:
    """Per stage: seconds and peak RSS at each size, the log-log time exponent over the
    generations count (and, for a stage recorded per shard, the same without its first
    shard, which pays the one-off loads), and the peak memory's growth from the smallest to
    the largest size."""
    head = " | ".join(f"{s} s" for s in sizes)
    mem = " | ".join(f"{s} MiB" for s in sizes)
    lines = [
        f"| stage | {head} | exponent | without 1st shard | {mem} | memory growth |",
        "|---|" + "---:|" * (2 * len(sizes) + 3),
    ]
    by_stage = [{r.stage: r for r in run} for run in runs]
    order = [r.stage for r in runs[0]]
    for stage in order:
        found = [run.get(stage) for run in by_stage]
        seconds = [f.seconds if f else 0.0 for f in found]
        peaks = [f.peak_rss_mib if f else None for f in found]
        exponent = loglog_exponent(sizes, seconds) if all(found) else None
        steady = [f.steady_seconds if f else None for f in found]
        steady_exponent = (
            loglog_exponent(sizes, [s or 0.0 for s in steady])
            if all(s is not None for s in steady)
            else None
        )
        growth = memory_growth(peaks)
        lines.append(
            f"| {stage} | "
            + " | ".join(_num(s) for s in seconds)
            + f" | {_num(exponent, 2)} | {_num(steady_exponent, 2)} | "
            + " | ".join(_num(p, 0) for p in peaks)
            + f" | {_pct(growth, '+')} |"
        )
    whole = loglog_exponent(sizes, total_seconds)
    lines.append(
        "| whole run | "
        + " | ".join(_num(s) for s in total_seconds)
        + f" | {_num(whole, 2)} | | "
        + " | " * (len(sizes) - 1)
        + " | |"
    )
    return lines
