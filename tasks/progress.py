"""Where a stage's progress lines go: the run's log (the terminal and the Prefect UI's log)
and a progress artifact in the UI, one per stage call that counts its work.

The log line is said at once; the artifact is written by a thread of its own (created with
the first line, updated with the newest), in a copy of the task run's context so the UI files
it under the task run, and a Prefect server that is slow or away never holds the stage up.
"""

from __future__ import annotations

import contextvars
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

from sago_core.progress import EVERY_SECONDS, Progress, Sink, reporting

F = TypeVar("F", bound=Callable[..., Any])
LOG = logging.getLogger("sago.progress")


def with_progress(stage: str, fn: F, every: float = EVERY_SECONDS) -> F:
    """``fn`` run with its batches' progress reported as ``stage`` (a line at least every
    ``every`` seconds)."""

    @wraps(fn)
    def reported(*args: Any, **kwargs: Any) -> Any:
        with reporting(stage, run_sink(), every):
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
    """The stage's progress artifact, created with the first line and updated with the
    next, all from a writer thread of its own that runs in a copy of the task run's context
    (so Prefect files the artifact under the task run whichever thread said the line)."""

    def __init__(self) -> None:
        self.context = contextvars.copy_context()
        self.lines: queue.Queue[Progress] = queue.Queue()
        self.writer: threading.Thread | None = None

    def show(self, line: Progress) -> None:
        self.lines.put(line)
        if self.writer is None:
            self.writer = threading.Thread(
                target=self.context.run, args=(self._write,), daemon=True
            )
            self.writer.start()

    def _write(self) -> None:
        """Until the stage's final line is written (then the thread ends)."""
        made: UUID | None = None
        final = False
        while not final:
            line = self.lines.get()
            while not self.lines.empty():  # only the newest line matters
                line = self.lines.get()
            final = line.final
            try:
                if made is None:
                    created = create_progress_artifact(
                        progress=100 * line.share, description=line.text
                    )
                    made = created if isinstance(created, UUID) else None
                else:
                    update_progress_artifact(made, 100 * line.share, line.text)
            except Exception as exc:  # only the UI shows it: never stop the stage
                LOG.debug("progress artifact not written for %s: %s", line.stage, exc)
