"""Stopping a run on SIGTERM or SIGINT: within seconds, resumably, with one line.

A scheduler, Kubernetes or ``timeout`` sends SIGTERM and waits (Kubernetes: 30 s) before
SIGKILL; Ctrl-C sends SIGINT to the terminal's whole foreground process group. On the first
signal the run stops asking its engine: ``StopRequested`` (a ``KeyboardInterrupt``) is raised
in the main thread wherever it is and unwinds the flow. An artifact being written is
discarded (its temp file is removed; the rename that would publish it never happens), and
Prefect marks the task run and the flow run **Crashed** ("Execution was aborted by an
interrupt signal"; for a SIGTERM inside a flow run Prefect's own handler raises its
``TerminationSignal`` first: "... by a termination signal"). Then, in this order: the
processes this run started (local device workers, a vLLM engine worker) get SIGTERM, and
SIGKILL after ``CHILD_GRACE_S``; Prefect's queued logs and events are sent; sago's temporary
Prefect server (``flows.runtime.temporary_server``) is stopped, last, since the flow run and
the workers report to it; and the process prints one line, ``stopped; resume with: sago
resume runs/<id>``, and exits 130 (SIGINT) or 143 (SIGTERM), without a traceback.

Whatever is left of that is cut short ``GRACE_S`` after the first signal (the main thread
may be inside a long native call: a watcher thread notes the signal even then), and a second
signal exits at once: every child process group killed, the line printed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import NoReturn, Protocol

GRACE_S = 8.0  # first signal -> exit, at most (well inside Kubernetes' 30 s, under 10 s)
CHILD_GRACE_S = 3.0  # SIGTERM -> SIGKILL for a child process
DRAIN_S = 2.0  # Prefect's queued logs and events
SERVER_S = 3.0  # the temporary server's own shutdown
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopRequested(KeyboardInterrupt):
    """The run was asked to stop by ``signum``; unwinds the flow like a Ctrl-C."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum


class Server(Protocol):
    """What stopping needs of the temporary server (``temporary_server.SessionServer``)."""

    @property
    def pid(self) -> int | None: ...

    def stop(self) -> None: ...


def exit_code(signum: int) -> int:
    """The shell's convention: 128 + the signal's number (130 SIGINT, 143 SIGTERM)."""
    return 128 + signum


def child_processes(parent: int | None = None) -> list[int]:
    """The live child processes of ``parent`` (this process), read from ``/proc``. Where
    there is none (macOS) none are found: they end when their pipes to the run close."""
    parent = os.getpid() if parent is None else parent
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # gone meanwhile
            continue
        fields = text.rpartition(")")[2].split()  # after "pid (comm)": state, ppid, ...
        if len(fields) > 1 and fields[0] != "Z" and int(fields[1]) == parent:
            children.append(int(stat.parent.name))
    return sorted(children)


def signal_process(pid: int, signum: int) -> None:
    """``signum`` to ``pid``'s whole process group where it leads one of its own (a device
    worker's engine goes with it), else to ``pid`` alone; never to this process's group."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        group = os.getpgid(pid)
        if group == pid and group != os.getpgrp():
            os.killpg(group, signum)
        else:
            os.kill(pid, signum)


def alive(pid: int) -> bool:
    """``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def end_processes(pids: list[int], timeout_s: float) -> None:
    """SIGTERM each of ``pids``, SIGKILL those still alive after ``timeout_s``."""
    for pid in pids:
        signal_process(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in pids:
        if alive(pid):
            signal_process(pid, signal.SIGKILL)


def drain_prefect(timeout_s: float) -> None:
    """Send what Prefect has queued (logs, events) while its server still runs."""
    if "prefect" not in sys.modules:
        return
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for worker in (APILogWorker, EventsWorker):
        with contextlib.suppress(Exception):
            worker.drain_all(timeout=timeout_s / 2)


@dataclass
class Stopper:
    """The signal handling of one command (``stop_on_signals``). ``describe()``: the line it
    prints, asked once at the first signal (the run folder may only exist by then)."""

    describe: Callable[[], str]
    server: Server | None = None
    grace_s: float = GRACE_S
    signum: int | None = None
    raised: bool = False
    started: float = 0.0
    line: str = "stopped"
    _lock: threading.RLock = field(default_factory=threading.RLock)
    _announced: bool = False

    def begin(self, signum: int) -> None:
        """The first signal: note it and start the clock that ends the process at the latest
        ``grace_s`` later (idempotent)."""
        with self._lock:
            if self.signum is not None:
                return
            self.signum, self.started = signum, time.monotonic()
            try:
                self.line = self.describe()
            except Exception as exc:  # a line is owed even if the run folder is unreadable
                self.line = f"stopped ({type(exc).__name__}: {exc})"
        threading.Thread(target=self._deadline, name="sago-stop-deadline", daemon=True).start()

    def handle(self, signum: int, frame: FrameType | None) -> None:
        """The Python-level handler of SIGINT and SIGTERM (main thread): the first signal
        unwinds the run; any signal after it ends the process at once."""
        if self.raised:
            self.exit_now()
        self.begin(signum)
        self.raised = True
        raise StopRequested(self.signum or signum)

    def remaining(self, cap: float) -> float:
        return max(0.0, min(cap, self.started + self.grace_s - time.monotonic() - 0.5))

    def finish(self) -> NoReturn:
        """After the run unwound: workers, Prefect's queues, the server, the line, exit."""
        if self.signum is None:
            self.begin(signal.SIGTERM)  # Prefect's TerminationSignal, seen before our handler
        server_pid = self.server.pid if self.server is not None else None
        workers = [pid for pid in child_processes() if pid != server_pid]
        end_processes(workers, self.remaining(CHILD_GRACE_S))
        drain_prefect(self.remaining(DRAIN_S))
        if server_pid is not None and self.server is not None:
            stopper = threading.Thread(target=self.server.stop, daemon=True)
            stopper.start()
            stopper.join(self.remaining(SERVER_S))
            if alive(server_pid):
                signal_process(server_pid, signal.SIGKILL)
        self.exit_now(kill=False)

    def exit_now(self, kill: bool = True) -> NoReturn:
        """End the process now (any thread): every child's process group killed (unless
        ``kill`` is False: they were stopped in order), the line printed once."""
        with self._lock:
            if kill:
                for pid in child_processes():
                    signal_process(pid, signal.SIGKILL)
            if not self._announced:
                self._announced = True
                with contextlib.suppress(Exception):
                    sys.stdout.flush()
                with contextlib.suppress(Exception):
                    sys.stderr.write(self.line + "\n")
                    sys.stderr.flush()
            os._exit(exit_code(self.signum or signal.SIGTERM))

    def _deadline(self) -> None:
        time.sleep(max(0.0, self.started + self.grace_s - time.monotonic()))
        self.exit_now()

    def _watch(self, read_fd: int) -> None:
        """Note the first signal from the wakeup pipe: Python runs its handler only between
        bytecodes of the main thread, which may be inside a native call for a while."""
        while True:
            try:
                data = os.read(read_fd, 64)
            except OSError:
                data = b""
            if not data:  # the block ended: its write end is closed
                with contextlib.suppress(OSError):
                    os.close(read_fd)
                return
            for signum in data:
                if signum in SIGNALS:
                    self.begin(signum)


@contextlib.contextmanager
def stop_on_signals(line: Callable[[], str], server: Server | None = None) -> Iterator[Stopper]:
    """Run the block with SIGINT and SIGTERM handled as this module says (the main thread
    only; elsewhere the block runs as it is). ``line()``: the line printed on a stop
    (``Stopper.describe``). The previous handlers are back when the block ends without one."""
    stopper = Stopper(describe=line, server=server)
    if threading.current_thread() is not threading.main_thread():
        yield stopper
        return
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    previous = {s: signal.getsignal(s) for s in SIGNALS}
    old_wakeup = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    threading.Thread(
        target=stopper._watch, args=(read_fd,), name="sago-stop-watch", daemon=True
    ).start()
    for s in SIGNALS:
        signal.signal(s, stopper.handle)
    try:
        yield stopper
    except BaseException as exc:
        if stopper.signum is None and not _termination(exc):
            raise
        stopper.finish()
    else:
        if stopper.signum is not None:  # a stop whose exception some code swallowed
            stopper.finish()
    finally:
        signal.set_wakeup_fd(old_wakeup)
        for s, handler in previous.items():
            signal.signal(s, handler)
        os.close(write_fd)  # the watcher reads the end of the pipe and closes it


def _termination(exc: BaseException) -> bool:
    """A stop: ours, or Prefect's ``TerminationSignal`` (a SIGTERM its own handler caught
    inside a flow run, before ours saw it)."""
    if isinstance(exc, StopRequested):
        return True
    exceptions = sys.modules.get("prefect.exceptions")
    return exceptions is not None and isinstance(exc, exceptions.TerminationSignal)
