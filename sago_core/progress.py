"""How far a long stage has got: items done of the total, the rate, and the time left.

Core code marks its work where it loops over batches (``counted``); whoever runs the stage
decides where the lines go (``reporting``: the terminal and Prefect's log, for the task
adapters). A line comes when the stage starts its first batch, and at least every
``every`` seconds while the stage works (from a small timer thread, so a model that takes a
minute to load, or a batch that takes a minute, still shows the stage is alive), and once at
the end; a stage done within ``every`` seconds without counting anything says nothing.
Without a reporter, marking costs nothing and says nothing. Prefect-free; per context
(``contextvars``), so shards running side by side in threads each report their own stage.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")
# Seconds between two lines of one stage: "a line every ~10 s".
EVERY_SECONDS = 10.0


@dataclass(frozen=True)
class Progress:
    """One line: ``stage``'s ``done`` of ``total`` items after ``elapsed`` seconds."""

    stage: str
    done: float  # a batch under way counts by its decode steps
    total: int
    elapsed: float
    final: bool = False

    @property
    def seconds_left(self) -> float | None:
        """Time left at the rate so far (None before the first item is done)."""
        if self.done <= 0 or self.total <= self.done:
            return None if self.done <= 0 else 0.0
        return self.elapsed / self.done * (self.total - self.done)

    @property
    def share(self) -> float:
        return self.done / self.total if self.total else 1.0

    @property
    def text(self) -> str:
        if not self.total:  # nothing counted yet: a model loading, or uncounted work
            if self.final:
                return f"{self.stage}: done in {duration(self.elapsed)}"
            so_far = duration(self.elapsed)
            return f"{self.stage}: working (loading, or nothing counted yet), {so_far} so far"
        head = f"{self.stage}: {math.floor(self.done)}/{self.total} ({100 * self.share:.0f}%)"
        if self.final:
            return f"{head} done in {duration(self.elapsed)}"
        rate = self.done / self.elapsed if self.elapsed > 0 and self.done else None
        left = self.seconds_left
        pace = f", {rate:.2g}/s" if rate else ""
        eta = f", about {duration(left)} left" if left is not None else ", time left unknown yet"
        return f"{head}{pace}{eta}, {duration(self.elapsed)} so far"


def duration(seconds: float) -> str:
    """``42 s``, ``7 min``, ``1 h 05 min``."""
    if seconds < 90:
        return f"{math.ceil(seconds)} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"


Sink = Callable[[Progress], None]


class _Tracker:
    def __init__(self, stage: str, sink: Sink, every: float) -> None:
        self.stage = stage
        self.sink = sink
        self.every = every
        self.total = 0
        self.done = 0.0
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._counting = False
        self._said = False
        self._timer = threading.Thread(target=self._tick, name="sago-progress", daemon=True)

    def start(self) -> None:
        self._timer.start()

    def expect(self, items: int) -> None:
        with self._lock:
            self.total += items
            first = not self._counting
            self._counting = True
        if first:
            self._say()

    def advance(self, items: float) -> None:
        with self._lock:
            self.done += items

    def settle(self, done: float) -> None:
        with self._lock:
            self.done = done

    def _tick(self) -> None:
        while not self._stop.wait(self.every):
            self._say()

    def _say(self, final: bool = False) -> None:
        with self._lock:
            line = Progress(self.stage, self.done, self.total, self.elapsed(), final)
            self._said = True
        # A line nobody could take must never stop the stage's work.
        with contextlib.suppress(Exception):
            self.sink(line)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def close(self) -> None:
        self._stop.set()
        self._timer.join()
        if self._said:
            self._say(final=True)


_CURRENT: contextvars.ContextVar[_Tracker | None] = contextvars.ContextVar(
    "sago_progress", default=None
)


@contextmanager
def reporting(stage: str, sink: Sink, every: float = EVERY_SECONDS) -> Iterator[None]:
    """While inside, the batches ``counted`` in this context report to ``sink`` as
    ``stage``. A stage that counts nothing (all of it cached) says nothing."""
    tracker = _Tracker(stage, sink, every)
    tracker.start()
    token = _CURRENT.set(tracker)
    try:
        yield
    finally:
        _CURRENT.reset(token)
        tracker.close()


def counted(batches: Iterable[Sequence[T]], total: int) -> Iterator[Sequence[T]]:
    """``batches`` as they are, with the current stage told ``total`` more items to do and
    each batch's items done once the caller has finished with it."""
    tracker = _CURRENT.get()
    if tracker is None or total <= 0:
        yield from batches
        return
    tracker.expect(total)
    for batch in batches:
        before = tracker.done
        yield batch
        tracker.settle(before + len(batch))


def stepper(items: int, steps: int) -> Callable[[], None] | None:
    """For a batch of ``items`` that takes up to ``steps`` steps (a generation's decode
    steps): a call per step moves the stage on by items/steps, so a batch that takes a
    minute still moves its line; ``counted`` settles the batch's count when it ends. None
    outside a reporter."""
    tracker = _CURRENT.get()
    if tracker is None or steps <= 0:
        return None
    share = items / steps
    left = [steps]

    def step() -> None:
        if left[0] > 0:
            left[0] -= 1
            tracker.advance(share)

    return step


def each(items: Iterable[T], total: int) -> Iterator[T]:
    """``items`` as they are, one item done each (``counted`` for a loop over rows)."""
    tracker = _CURRENT.get()
    if tracker is None or total <= 0:
        yield from items
        return
    tracker.expect(total)
    for item in items:
        yield item
        tracker.advance(1)
