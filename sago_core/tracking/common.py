"""What the trackers share: the error a tracker that is down raises, and the experiment a
model's runs belong to."""

from __future__ import annotations

import hashlib
import re

from sago_core.errors import SagoError

EXPERIMENT_PREFIX = "sago"


class TrackerUnavailable(SagoError):
    """The tracker did not answer (a server down, a timeout): nothing was logged."""


def experiment_name(model: str) -> str:
    """``sago/<family>``: the watch's family of the model (its architecture from its
    ``config.json``, else its spec), so every release of a model lands in one experiment
    and the tracker's charts show the trend across releases."""
    from sago_core.watch.releases import model_family  # the watch owns what a family is

    return f"{EXPERIMENT_PREFIX}/{model_family(model)}"


def wandb_run_id(run_id: str, model: str) -> str:
    """A stable W&B run id per (sago run, model): logging a run again resumes it. W&B ids
    take letters, digits, ``-`` and ``_``."""
    digest = hashlib.sha256(f"{run_id}\x1f{model}".encode()).hexdigest()[:12]
    readable = re.sub(r"[^A-Za-z0-9_-]+", "-", run_id).strip("-")[:40]
    return f"{readable}-{digest}"
