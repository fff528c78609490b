"""Can the study reach significance at all? The design check, made before anything runs.

A pair is significant when its Holm-corrected p (over the pairs of one series, metric and
method) is at most alpha. Whether that can ever happen depends on the design alone:

- **the test's smallest attainable p.** The block-permutation test
  (``statistics.partial_correlation.block_permutation_p``) with m blocks of the checkpoints
  can give no p below 1 / m! (all orderings enumerated, the observed one counts) or
  1 / (draws + 1) (random orderings, m! > ``MAX_EXACT``). The t-test's p reaches 0 as |r|
  reaches 1, so any p is attainable once the adjustment leaves one degree of freedom.
- **the correction.** Holm's smallest corrected p is pairs x the smallest p (its first
  step); Benjamini-Hochberg's is the smallest p itself, reached only when every pair
  reaches it (a lone pair gets pairs x the smallest p there too).

Significance is *unreachable* when Holm's smallest corrected p exceeds alpha: then no data
can make a pair significant, and the study can only report that. The check also gives the
fewest checkpoints per series that would make it reachable. The minimum-detectable table
takes its critical |r| from the test actually corrected: the t-test's critical |r| at
Holm's first step for the t-test; for the permutation test no fixed |r| exists (its
threshold depends on the residuals), so that column says reachable or not instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations
from typing import Literal

from sago_core.statistics.multiple_testing import benjamini_hochberg, holm
from sago_core.statistics.partial_correlation import (
    MAX_EXACT,
    Adjustment,
    blocks_of,
    knots_for,
    minimum_checkpoints,
    smallest_permutation_p,
)

Test = Literal["permutation", "t"]
SEARCH_LIMIT = 1000  # checkpoints: beyond this the design check stops looking


@dataclass(frozen=True)
class Reachability:
    series: str
    method: Adjustment
    checkpoints: int
    pairs: int
    test: Test
    alpha: float
    smallest_p: float | None  # of one pair; None: the test is undefined at this size
    smallest_holm: float | None  # pairs x smallest_p (capped at 1)
    smallest_bh: float | None  # smallest_p, every pair at it
    reachable: bool
    checkpoints_needed: int | None  # fewest checkpoints with reachable significance
    reason: str  # one sentence: the arithmetic and the verdict

    def line(self) -> str:
        return f"{self.series} ({self.method}): {self.reason}"


def smallest_attainable_p(
    test: Test,
    checkpoints: int,
    method: Adjustment = "linear",
    block_length: int = 2,
    draws: int = 9999,
    knots: int | None = None,
) -> float | None:
    """The smallest p one pair's test can give at this size (None: undefined there)."""
    if checkpoints < minimum_checkpoints(method, knots_for(checkpoints, knots)):
        return None
    if test == "t":
        return 0.0  # |r| = 1 gives p = 0
    return smallest_permutation_p(checkpoints, block_length, draws)


def _corrected(smallest: float | None, pairs: int) -> tuple[float | None, float | None]:
    """(Holm's smallest corrected p: one pair at the minimum, the others at 1;
    BH's: every pair at the minimum), through the corrections the table uses."""
    if smallest is None or pairs < 1:
        return None, None
    alone = holm([smallest] + [1.0] * (pairs - 1))[0]
    every = benjamini_hochberg([smallest] * pairs)[0]
    return alone, every


def _search(
    test: Test,
    pairs: int,
    alpha: float,
    method: Adjustment,
    block_length: int,
    draws: int,
    knots: int | None,
    start: int,
) -> int | None:
    for n in range(start, SEARCH_LIMIT + 1):
        smallest = smallest_attainable_p(test, n, method, block_length, draws, knots)
        holm_p, _ = _corrected(smallest, pairs)
        if holm_p is not None and holm_p <= alpha:
            return n
    return None


def _orderings(n: int, block_length: int, draws: int) -> str:
    m = len(blocks_of(n, block_length))
    count = math.factorial(m)
    if count > MAX_EXACT:
        return f"{m} blocks of {block_length}, {draws:,} random orderings of {count:,}"
    return f"{m} blocks of {block_length}, {count:,} orderings"


def reachability(
    series: str,
    checkpoints: int,
    pairs: int,
    test: Test = "permutation",
    alpha: float = 0.05,
    method: Adjustment = "linear",
    block_length: int = 2,
    draws: int = 9999,
    knots: int | None = None,
) -> Reachability:
    """The design check for one series and adjustment (module doc)."""
    smallest = smallest_attainable_p(test, checkpoints, method, block_length, draws, knots)
    holm_p, bh_p = _corrected(smallest, pairs)
    reachable = holm_p is not None and holm_p <= alpha
    needed = (
        checkpoints
        if reachable
        else _search(test, pairs, alpha, method, block_length, draws, knots, checkpoints + 1)
    )
    what = (
        f"permutation test ({_orderings(checkpoints, block_length, draws)})"
        if test == "permutation"
        else "t-test"
    )
    head = f"{checkpoints} checkpoints, {pairs} OOD pairs, {what}"
    if smallest is None:
        reason = f"{head}: the {method} adjustment is undefined at this size"
    elif reachable:
        reason = (
            f"{head}: smallest p {smallest:.3g}, smallest Holm p {holm_p:.3g} <= alpha "
            f"{alpha:g}: significance is reachable"
        )
        if (
            test == "permutation"
            and math.factorial(len(blocks_of(checkpoints, block_length))) <= MAX_EXACT
        ):
            total = round(1 / smallest)
            top = math.floor(alpha / pairs * total + 1e-9)  # hits allowed at Holm's 1st step
            reason += (
                f" (at Holm's first step a pair's observed |r| must be among the {top} most "
                f"extreme of {total:,} orderings)"
            )
    else:
        reason = (
            f"{head}: smallest p {smallest:.3g}; Holm over {pairs} pairs: smallest corrected "
            f"p {holm_p:.3g} > alpha {alpha:g}: NO pair can be significant, whatever the data "
            f"(BH: {bh_p:.3g}, and only if every pair reaches the smallest p)"
        )
    if not reachable:
        reason += (
            f"; {needed} checkpoints per series would make it reachable"
            if needed is not None
            else "; no number of checkpoints makes it reachable with these settings"
            + (" (raise permutation_draws)" if test == "permutation" else "")
        )
    return Reachability(
        series,
        method,
        checkpoints,
        pairs,
        test,
        alpha,
        smallest,
        holm_p,
        bh_p,
        reachable,
        needed,
        reason,
    )


def study_reachability(
    series: dict[str, int],
    out_of_distribution: int,
    test: Test,
    alpha: float,
    block_length: int,
    draws: int,
    knots: int | None,
    methods: tuple[Adjustment, ...] = ("linear", "spline"),
) -> list[Reachability]:
    """Per series (its number of checkpoints) and adjustment, for a study over
    ``out_of_distribution`` OOD datasets (every pair of them)."""
    pairs = len(list(combinations(range(out_of_distribution), 2)))
    return [
        reachability(name, n, pairs, test, alpha, method, block_length, draws, knots)
        for name, n in series.items()
        for method in methods
    ]


def design_lines(checks: list[Reachability]) -> list[str]:
    """The plan's lines: a verdict first, then one line per series and adjustment."""
    blocked = [c for c in checks if not c.reachable]
    if not blocked:
        verdict = "Design check: significance is reachable for every series and adjustment."
    else:
        verdict = (
            f"Design check: significance is UNREACHABLE for {len(blocked)} of {len(checks)} "
            "series/adjustment combinations; no pair there can be called significant."
        )
    return [verdict, *(f"  {c.line()}" for c in checks)]
