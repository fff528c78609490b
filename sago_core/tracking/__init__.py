"""Experiment trackers: a finished run, read from its artifacts alone, logged to MLflow
and Weights & Biases (``track_run``). Each tracker lives in its own module and imports its
library only when used; the ``track`` extra installs them."""

from sago_core.tracking.track import TrackingOutcome, track_run

__all__ = ["TrackingOutcome", "track_run"]
