"""Task: log the finished run to the experiment trackers its config names. Never cached
(a tracker is told every time the run finishes) and never failing: a tracker that is down
gives one warning line and the run stands on its own artifacts."""

from __future__ import annotations

from pathlib import Path

from prefect import task

from sago_core.config.tracking import TrackingSettings
from sago_core.tracking.track import outcome_lines, track_run


@task(name="track-run", task_run_name="track-run")
def track_run_task(run_dir: str, settings: TrackingSettings) -> list[str]:
    """One line per tracker: what it logged, or the warning it gave."""
    return outcome_lines(track_run(Path(run_dir), settings))
