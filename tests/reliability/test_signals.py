"""SIGTERM and SIGINT stop a run within seconds, resumably (``flows.runtime.stopping``).

Each run is a real process on the ``mock:`` backend, paused at a point (signal_target.py):
inside a generation batch, inside the teacher-forced scoring pass, inside the upload of a
shard's generations to an object store, and, with sago's own temporary Prefect server, a
Ctrl-C sent to the run's whole process group as a terminal does. Checked each time: the exit
time (printed; at most ``LIMIT_S``), the exit code (128 + the signal), exactly one line
``stopped; resume with: sago resume <run folder>`` and no traceback, Prefect's report of the
crash, then `sago resume` of that folder finishing with the same artifacts as an
uninterrupted run. A second signal ends the process at once, even while a child process
that ignores SIGTERM holds up the orderly stop, and that child is gone. Without the flow
(fast): a child that ignores SIGTERM is killed after its grace, a main thread stuck in a
native call is ended at the deadline, and the line a stop prints.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest
import yaml

from sago.flows.runtime.stopping import end_processes
from sago_cli.run import stop_line
from sago_core.artifacts.layout import RunLayout
from sago_core.config import RunConfig
from tests.reliability.harness import (
    ROOT,
    TargetProcesses,
    final_tables,
    manifest_problems,
    run_dirs,
    target_processes,
    write_inputs,
)
from tests.storage.s3_server import create_bucket, s3_server, store_environment

LIMIT_S = 10.0  # the stop bound sago promises: a guard only, the measured times are printed
REACH_S = 600.0  # a run reaching its pause point (a fresh temporary server included)
CRASHED = re.compile(r"Flow run '[^']+' - Crash detected! Execution was aborted by an? \w+ signal")


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The data file every run reads (one path, so every run has the same run id)."""
    return tmp_path_factory.mktemp("inputs")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, str], str, Path]]:
    """A bucket on a local S3 server: (the environment that reaches it, the runs folder's
    URL there, this machine's scratch folder for it)."""
    folder = tmp_path_factory.mktemp("store")
    with s3_server(folder / "moto.log") as endpoint:
        create_bucket(endpoint, "sago-signals")
        scratch = folder / "scratch"
        env = {**store_environment(endpoint), "SAGO_SCRATCH": str(scratch)}
        yield env, "s3://sago-signals/team/runs", scratch


@pytest.fixture(scope="module")
def runs(server_env: dict[str, str], store: tuple[dict[str, str], str, Path]) -> TargetProcesses:
    """Forked runs (``harness.TargetProcesses``) that reach the Prefect server and the store."""
    return target_processes({**server_env, **store[0]})


@pytest.fixture(scope="module")
def golden(runs: TargetProcesses, shared: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """An uninterrupted run's final tables: what every resumed run must equal."""
    root = tmp_path_factory.mktemp("golden")
    outcome = runs.run(write_inputs(shared, root), root / "calls.jsonl")
    assert outcome.returncode == 0, outcome.output[-3000:]
    (run_dir,) = run_dirs(root / "runs")
    return final_tables(run_dir)


def running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def wait_for_pause(marker: Path, pid: int, output: Path) -> dict:
    """What the run wrote on reaching its pause point (it must not end before)."""
    deadline = time.monotonic() + REACH_S
    while not marker.exists():
        assert running(pid), f"the run ended before its pause point:\n{output.read_text()[-3000:]}"
        assert time.monotonic() < deadline, "the run did not reach its pause point"
        time.sleep(0.05)
    time.sleep(0.2)  # inside the pause's sleep, not between the marker and it
    return json.loads(marker.read_text())


def check_stopped(code: int, signum: int, out: str, err: str, resume_with: str) -> None:
    assert code == 128 + signum, out[-2000:] + err[-3000:]
    assert "Traceback" not in out + err, err[-3000:]
    assert [line for line in err.splitlines() if line.startswith("stopped")] == [
        f"stopped; resume with: sago resume {resume_with}"
    ], err[-3000:]


def check_resumed(
    runs: TargetProcesses, run: str, run_dir: Path, calls: Path, golden: dict
) -> None:
    _, key, output, _ = runs.spawn("signal_target", ["resume", run, str(calls)])
    assert runs.wait(key) == 0, output.read_text()[-3000:]
    assert manifest_problems(run_dir) == []
    tables = final_tables(run_dir)
    for name, frame in golden.items():
        assert tables[name].equals(frame), f"{name} differs from the uninterrupted run"
    assert not [p for p in run_dir.rglob("*") if p.name.endswith(".tmp")]


def stop_forked(
    runs: TargetProcesses, config: Path, point: str, hit: int, signum: int, root: Path
) -> tuple[int, float, str, str]:
    """One run paused at ``point``, sent ``signum``: (exit code, seconds to exit, out, err)."""
    marker = root / "marker.json"
    argv = ["run", str(config), str(root / "calls.jsonl"), point, str(hit), str(marker)]
    pid, key, out, err = runs.spawn("signal_target", argv, stderr_apart=True)
    wait_for_pause(marker, pid, err)
    sent = time.monotonic()
    os.kill(pid, signum)
    code = runs.wait(key)
    return code, time.monotonic() - sent, out.read_text(), err.read_text()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("point", "hit", "signum"),
    [("generation", 7, signal.SIGTERM), ("scoring", 4, signal.SIGINT)],
    ids=["generation-SIGTERM", "scoring-SIGINT"],
)
def test_a_signal_stops_the_run_in_seconds_and_resume_finishes_it(
    runs: TargetProcesses,
    shared: Path,
    golden: dict,
    tmp_path: Path,
    point: str,
    hit: int,
    signum: int,
) -> None:
    config = write_inputs(shared, tmp_path)
    code, seconds, out, err = stop_forked(runs, config, point, hit, signum, tmp_path)
    print(f"{point}: {signal.Signals(signum).name} -> exit {code} in {seconds:.2f} s")
    (run_dir,) = run_dirs(tmp_path / "runs")
    check_stopped(code, signum, out, err, str(run_dir))
    assert CRASHED.search(err), err[-3000:]
    assert seconds <= LIMIT_S
    check_resumed(runs, str(run_dir), run_dir, tmp_path / "calls.jsonl", golden)


@pytest.mark.slow
def test_a_signal_during_a_store_upload_stops_the_run_and_resume_finishes_it(
    runs: TargetProcesses,
    store: tuple[dict[str, str], str, Path],
    shared: Path,
    golden: dict,
    tmp_path: Path,
) -> None:
    _, url, scratch = store
    config = write_inputs(shared, tmp_path)
    values = yaml.safe_load(config.read_text())
    config.write_text(yaml.safe_dump({**values, "runs_dir": url}))
    code, seconds, out, err = stop_forked(runs, config, "upload", 2, signal.SIGTERM, tmp_path)
    print(f"store upload: SIGTERM -> exit {code} in {seconds:.2f} s")
    (mirror,) = list(scratch.iterdir())
    (run_dir,) = run_dirs(mirror)
    check_stopped(code, signal.SIGTERM, out, err, f"{url}/{run_dir.name}")
    assert CRASHED.search(err), err[-3000:]
    assert seconds <= LIMIT_S
    check_resumed(runs, f"{url}/{run_dir.name}", run_dir, tmp_path / "calls.jsonl", golden)


@pytest.mark.slow
def test_a_second_signal_exits_at_once_even_past_a_child_that_ignores_sigterm(
    runs: TargetProcesses, shared: Path, golden: dict, tmp_path: Path
) -> None:
    config, marker = write_inputs(shared, tmp_path), tmp_path / "marker.json"
    argv = ["run", str(config), str(tmp_path / "calls.jsonl"), "stubborn", "3", str(marker)]
    pid, key, out, err = runs.spawn("signal_target", argv, stderr_apart=True)
    child = wait_for_pause(marker, pid, err)["child"]
    first = time.monotonic()
    os.kill(pid, signal.SIGINT)
    time.sleep(1.0)  # the orderly stop now waits for the child (SIGTERM, then SIGKILL)
    second = time.monotonic()
    os.kill(pid, signal.SIGINT)
    code = runs.wait(key)
    seconds = time.monotonic() - second
    print(f"second SIGINT -> exit {code} in {seconds:.2f} s ({time.monotonic() - first:.2f} s)")
    (run_dir,) = run_dirs(tmp_path / "runs")
    check_stopped(code, signal.SIGINT, out.read_text(), err.read_text(), str(run_dir))
    assert seconds <= 2.0
    deadline = time.monotonic() + 2
    while running(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not running(child), "the child that ignores SIGTERM outlived the run"
    check_resumed(runs, str(run_dir), run_dir, tmp_path / "calls.jsonl", golden)


def server_children(pid: int) -> list[int]:
    """The Prefect server processes whose parent is ``pid``."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rpartition(")")[2].split()[1])
            command = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError):
            continue
        if parent == pid and b"prefect.server.api.server:create_app" in command:
            found.append(int(stat.parent.name))
    return found


def session_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[3])


@pytest.mark.slow
def test_ctrl_c_to_the_process_group_spares_the_temporary_server_until_the_run_reported(
    runs: TargetProcesses, shared: Path, golden: dict, tmp_path: Path
) -> None:
    """No PREFECT_API_URL: the run starts its own temporary server; SIGINT goes to the run's
    whole process group, as a terminal's Ctrl-C does."""
    config, marker = write_inputs(shared, tmp_path), tmp_path / "marker.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    home = tmp_path / "prefect"
    env |= {
        "PREFECT_HOME": str(home),
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "300",
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": str(ROOT),
    }
    calls = tmp_path / "calls.jsonl"
    argv = ["run", str(config), str(calls), "generation", "3", str(marker)]
    with (tmp_path / "out").open("w") as out, (tmp_path / "err").open("w") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.reliability.signal_target", *argv],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
    try:
        wait_for_pause(marker, process.pid, tmp_path / "err")
        (server,) = server_children(process.pid)
        assert session_of(server) == server != session_of(process.pid)
        sent = time.monotonic()
        os.killpg(process.pid, signal.SIGINT)
        code = process.wait(timeout=60)
        seconds = time.monotonic() - sent
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    print(f"Ctrl-C to the group, own server: exit {code} in {seconds:.2f} s")
    (run_dir,) = run_dirs(tmp_path / "runs")
    output, errors = (tmp_path / "out").read_text(), (tmp_path / "err").read_text()
    check_stopped(code, signal.SIGINT, output, errors, str(run_dir))
    assert "ConnectError" not in errors
    assert not running(server), "the temporary server outlived the run"
    with sqlite3.connect(home / "prefect.db") as db:
        states = db.execute("SELECT state_type FROM flow_run").fetchall()
    assert states == [("CRASHED",)]
    assert seconds <= LIMIT_S
    check_resumed(runs, str(run_dir), run_dir, calls, golden)


def test_the_temporary_server_is_prefects_own_command_in_a_session_of_its_own() -> None:
    """sago's server runs what Prefect's temporary server runs (a Prefect upgrade that
    changes it fails here), only in a session of its own."""
    from prefect.server.api.server import SubprocessASGIServer

    from sago.flows.runtime.temporary_server import SessionServer

    prefects, ours = SubprocessASGIServer(port=8001), SessionServer(port=8002)
    try:
        with mock.patch("subprocess.Popen") as popen:
            prefects._run_uvicorn_command()
            ours._run_uvicorn_command()
        prefect_call, our_call = popen.call_args_list
        theirs = prefect_call.kwargs["args"]
        assert theirs[theirs.index("--port") + 1] == "8001"
        mine = ["8002" if arg == "8001" else arg for arg in theirs]
        assert our_call.kwargs == {**prefect_call.kwargs, "args": mine, "start_new_session": True}
    finally:
        SubprocessASGIServer._instances.pop(8001, None)
        SubprocessASGIServer._instances.pop(8002, None)


STUCK = """
import os, sys
from sago.flows.runtime.stopping import stop_on_signals
with stop_on_signals(lambda: "stopped; resume with: sago resume runs/x") as stopper:
    stopper.grace_s = float(sys.argv[1])
    print("ready", flush=True)
    os.system("exec sleep 60")  # a native wait: Python runs no handler until it returns
print("not stopped", flush=True)
"""


def test_a_main_thread_stuck_in_a_native_call_is_ended_at_the_deadline() -> None:
    """The watcher notes the signal from the wakeup pipe: the deadline holds even when the
    Python-level handler cannot run."""
    process = subprocess.Popen(
        [sys.executable, "-c", STUCK, "1.5"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert process.stdout is not None and process.stdout.readline() == "ready\n"
        time.sleep(0.3)  # inside os.system
        sent = time.monotonic()
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
        seconds = time.monotonic() - sent
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    print(f"stuck main thread: exit {process.returncode} in {seconds:.2f} s (deadline 1.5 s)")
    check_stopped(process.returncode, signal.SIGTERM, out, err, "runs/x")
    assert 1.4 <= seconds <= 5.0


def test_a_child_that_ignores_sigterm_is_killed_after_its_grace() -> None:
    stubborn = subprocess.Popen(
        [sys.executable, "-c", STUBBORN_READY], stdout=subprocess.PIPE, text=True
    )
    polite = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert stubborn.stdout is not None and stubborn.stdout.readline() == "ready\n"
        started = time.monotonic()
        end_processes([stubborn.pid, polite.pid], timeout_s=0.5)
        seconds = time.monotonic() - started
        assert stubborn.wait(timeout=5) == -signal.SIGKILL
        assert polite.wait(timeout=5) == -signal.SIGTERM
    finally:
        for child in (stubborn, polite):
            if child.poll() is None:
                child.kill()
    assert 0.5 <= seconds <= 2.0


STUBBORN_READY = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ready', flush=True); time.sleep(60)"
)


def test_the_stop_line_names_the_run_folder_as_the_user_named_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    config = RunConfig(preset="demo", runs_dir=Path("runs"))
    run_id = config.resolved_run_id()
    assert stop_line(config) == "stopped before the run saved anything; run the same command again"
    saved = RunLayout.of(config.runs_dir, run_id).run_config
    saved.parent.mkdir(parents=True)
    saved.write_text("{}")
    assert stop_line(config) == f"stopped; resume with: sago resume runs/{run_id}"
    monkeypatch.setenv("SAGO_SCRATCH", str(tmp_path / "scratch"))
    on_store = RunConfig(preset="demo", runs_dir="s3://bucket/team/runs")  # type: ignore[arg-type]
    store_id = on_store.resolved_run_id()
    saved = RunLayout.of(on_store.runs_dir, store_id).run_config
    saved.parent.mkdir(parents=True)
    saved.write_text("{}")
    line = f"stopped; resume with: sago resume s3://bucket/team/runs/{store_id}"
    assert stop_line(on_store) == line
