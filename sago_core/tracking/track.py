"""``track_run``: log a finished run folder to every tracker its settings name.

The run's artifacts are the record; a tracker is a copy of it. So a tracker that is down,
refuses the login or rejects a value never fails the run: it gets one warning line naming
the tracker and the reason, and the outcome says it was not logged. A run without a
stability card gets one first (what ``sago card RUN`` writes), so the tracker keeps the
card beside the report.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from sago_core.artifacts.layout import CARD_MD_FILE, SUMMARY_FILE, RunLayout
from sago_core.config.places import public_text
from sago_core.config.tracking import TrackingSettings
from sago_core.registry.plugins import resolve
from sago_core.tracking.record import RunRecord, read_run

LOG = logging.getLogger("sago.tracking")


@dataclass(frozen=True)
class TrackingOutcome:
    """One tracker's result: the ids of the runs it logged, or why it logged none."""

    tracker: str
    logged: tuple[str, ...] = ()
    warning: str | None = None


def _ensure_card(layout: RunLayout) -> None:
    run_dir = layout.run_dir
    if (run_dir / CARD_MD_FILE).is_file() or not (run_dir / SUMMARY_FILE).is_file():
        return
    from sago_core.report.card.build import write_card

    try:
        write_card(run_dir)
    except Exception as exc:  # the card is a copy too: the trackers get the run without it
        LOG.warning("sago tracking: no stability card for %s (%s)", run_dir.name, _reason(exc))


# tracker -> its logger, imported when used (its library comes with the ``track`` extra)
LOGGERS = {
    "mlflow": "sago_core.tracking.mlflow_tracker:log_to_mlflow",
    "wandb": "sago_core.tracking.wandb_tracker:log_to_wandb",
}


def _trackers(settings: TrackingSettings) -> list[tuple[str, Callable[[RunRecord], list[str]]]]:
    """Each tracker ``settings`` names (its section set), with its logger."""
    named = {name: getattr(settings, name) for name in LOGGERS}
    return [(n, partial(_log, LOGGERS[n], s)) for n, s in named.items() if s is not None]


def _log(logger: str, section: object, run: RunRecord) -> list[str]:
    logged: list[str] = resolve(logger)(run, section)
    return logged


def _reason(exc: BaseException) -> str:
    """One line, no credentials of a URL in it (a tracker's URI may hold a password)."""
    text = public_text(" ".join(str(exc).split())) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def track_run(run_dir: Path, settings: TrackingSettings) -> list[TrackingOutcome]:
    """Log the finished run in ``run_dir`` (or a paired comparison's ``paired.parquet``) to
    each tracker of ``settings``. Never raises for a tracker: each one that fails logs one
    warning line and returns its reason, and a run that cannot be read (not a finished run,
    a broken artifact) is one warning outcome (tracker ``tracking``) rather than an
    exception: the run is finished, whatever a copy of it costs."""
    try:
        if run_dir.is_dir():
            _ensure_card(RunLayout(run_dir.resolve()))
        run = read_run(run_dir)
    except Exception as exc:
        message = f"sago tracking: {run_dir.name} not logged to any tracker: {_reason(exc)}"
        LOG.warning(message)
        return [TrackingOutcome("tracking", warning=message)]
    outcomes = []
    for name, log_to in _trackers(settings):
        try:
            outcomes.append(TrackingOutcome(name, tuple(log_to(run))))
        except ImportError as exc:
            outcomes.append(
                _warn(name, run, f"not installed ({exc.name}): pip install 'sago[track]'")
            )
        except Exception as exc:  # any tracker failure leaves the run as it is
            outcomes.append(_warn(name, run, _reason(exc)))
    return outcomes


def _warn(name: str, run: RunRecord, reason: str) -> TrackingOutcome:
    message = f"sago tracking: run {run.run_id} not logged to {name}: {reason}"
    LOG.warning(message)
    return TrackingOutcome(name, warning=message)


def outcome_lines(outcomes: list[TrackingOutcome]) -> list[str]:
    """One line per tracker, for a command to print."""
    return [o.warning or f"logged to {o.tracker}: {', '.join(o.logged)}" for o in outcomes]
