"""Where a stage's progress lines go: the run's log (the terminal and the Prefect UI's log)
and a progress artifact in the UI, one per stage call that counts its work.

The log line is said at once; the artifact is created from the stage's own thread (so the
UI files it under the task run) and updated from a writer thread of its own, latest line
first, so a Prefect server that is slow or away never holds the stage up.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar
from uuid import UUID

from prefect.artifacts import create_progress_artifact, update_progress_artifact
from prefect.context import TaskRunContext
from prefect.exceptions import MissingContextError
from prefect.logging import get_run_logger

from sago_core.progress import Progress, Sink, reporting

F = TypeVar("F", bound=Callable[..., Any])
LOG = logging.getLogger("sago.progress")


def with_progress(stage: str, fn: F) -> F:
    """``fn`` run with its batches' progress reported as ``stage``."""

    @wraps(fn)
    def reported(*args: Any, **kwargs: Any) -> Any:
        with reporting(stage, run_sink()):
            return fn(*args, **kwargs)

    return reported  # type: ignore[return-value]


def run_sink() -> Sink:
    """A sink for the current task run (the module's logger outside one)."""
    try:
        logger: logging.Logger | logging.LoggerAdapter[Any] = get_run_logger()
    except MissingContextError:
        logger = LOG
    artifact = _Artifact() if TaskRunContext.get() is not None else None

    def sink(line: Progress) -> None:
        logger.info(line.text)
        if artifact is not None:
            artifact.show(line)

    return sink


class _Artifact:
    """The stage's progress artifact, created on the first line, then updated."""

    def __init__(self) -> None:
        self.id: UUID | None = None
        self.lines: queue.Queue[Progress] = queue.Queue()
        self.writer: threading.Thread | None = None

    def show(self, line: Progress) -> None:
        if self.writer is None:  # the first line: from the stage's own thread
            self.writer = threading.Thread(target=self._write, daemon=True)
            try:
                made = create_progress_artifact(progress=100 * line.share, description=line.text)
                self.id = made if isinstance(made, UUID) else None
            except Exception as exc:  # only the UI shows it: never stop the stage
                LOG.debug("no progress artifact for %s: %s", line.stage, exc)
            self.writer.start()
            return
        self.lines.put(line)

    def _write(self) -> None:
        while True:
            line = self.lines.get()
            while not self.lines.empty():  # only the newest line matters
                line = self.lines.get()
            if self.id is None:
                continue
            try:
                update_progress_artifact(self.id, 100 * line.share, line.text)
            except Exception as exc:
                LOG.debug("progress artifact not updated for %s: %s", line.stage, exc)
