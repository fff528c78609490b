"""A run's verdict on one axis, as the card states it and ``RunResult.verdicts`` returns it.

``above tolerance`` when the Holm-adjusted p-value of the run's reference test (eps 0.05 or
the noise floor, scoring/summary.py) is below alpha, ``not shown above tolerance`` otherwise:
failing to reject is not evidence of stability, so the words never say "stable". No test
(a null p-value) is no verdict; the summary row's ``missing_reason`` says why.
"""

from __future__ import annotations

from sago_core.statistics.paired import ALPHA

ABOVE_TOLERANCE = "above tolerance"
NOT_SHOWN_ABOVE = "not shown above tolerance"


def tolerance_verdict(p_holm: float | None) -> str | None:
    """The verdict of a Holm-adjusted reference p-value (None: no test ran)."""
    if p_holm is None:
        return None
    return ABOVE_TOLERANCE if p_holm < ALPHA else NOT_SHOWN_ABOVE
