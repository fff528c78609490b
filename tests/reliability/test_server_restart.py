"""Server restarts: a run attached to a real Prefect server (127.0.0.1, its own home and
SQLite database) while the server is stopped and started again on the same port and
database, as an upgrade, a crash or a failover does.

- Two restarts in one run (SIGTERM while the first shard generates, SIGKILL once the
  second shard's generations are on disk), 20 s down each: the run finishes, each wait is
  logged as a warning, no prompt is asked twice and the manifest's artifacts match their
  hashes.
- The server stays away longer than ``SAGO_SERVER_WAIT_S``: the run stops with one message
  that names the server and says how to resume, and ``sago resume`` after the server is
  back recomputes no finished shard (manifest ``cache_hit``, the mock backend's call log).

Prefect's own client retries are cut to two (``PREFECT_CLIENT_MAX_RETRIES=2``: 2 + 4 s), so
what rides out a 20 s outage is sago's wait, not luck in Prefect's back-off.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import polars as pl
import pytest

from tests.prefect_server import PREFECT, free_port
from tests.reliability.harness import ROOT, manifest_problems, run_dirs, write_inputs

pytestmark = pytest.mark.slow
DOWN_S = 20
DELAY_S = 0.3  # per generated prompt: the run is mid-stage when the server goes


class RestartableServer:
    """``prefect server start`` on one port and one database, stopped and started at will."""

    def __init__(self, home: Path) -> None:
        home.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.env = {
            **os.environ,
            "PREFECT_HOME": str(home),
            "PREFECT_API_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{home}/prefect.db",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_API_URL": f"http://127.0.0.1:{self.port}/api",
            "PREFECT_LOGGING_LEVEL": "WARNING",
            "PREFECT_CLIENT_MAX_RETRIES": "2",
            "SAGO_HOME": str(ROOT),
            "PYTHONPATH": str(ROOT),
            "HF_HUB_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
        }
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self, startup_s: float = 180) -> None:
        self.process = subprocess.Popen(
            [PREFECT, "server", "start", "--host", "127.0.0.1", "--port", str(self.port)],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        _until(self.healthy, startup_s, "the Prefect server to answer")
        self.starts += 1

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.env['PREFECT_API_URL']}/health", timeout=2):
                return True
        except OSError:
            return False

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> None:
        assert self.process is not None
        os.killpg(self.process.pid, sig)
        self.process.wait(timeout=60)
        self.process = None
        assert not self.healthy()


def _until(done: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, f"waited {timeout_s:.0f} s for {what}"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestartableServer]:
    """One server for the module (each test leaves it running; started again if not)."""
    server = RestartableServer(tmp_path_factory.mktemp("restartable") / "prefect")
    yield server
    if server.process is not None:
        server.stop()


@pytest.fixture
def running(server: RestartableServer) -> RestartableServer:
    if server.process is None or not server.healthy():
        if server.process is not None:
            server.stop()
        server.start()
    return server


def _start(config: Path, calls: Path, env: dict[str, str], *resume: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "tests.reliability.restart_target", str(config)]
    return subprocess.Popen(
        [*command, str(calls), str(DELAY_S), *resume],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _generated(calls: Path) -> Counter[str]:
    lines = [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []
    return Counter(c["prompt"] for c in lines if c["kind"] == "generate")


def _requests(run_dir: Path) -> Counter[str]:
    """The generations an uninterrupted run asks: each shard's prompts and kept variants
    (the noise floor's replay asks a base prompt a second time)."""
    wanted: Counter[str] = Counter()
    for shard in json.loads((run_dir / "shards" / "shards.json").read_text()):
        wanted.update(pl.read_parquet(shard["prompts_path"])["prompt"].to_list())
        variants = pl.read_parquet(shard["variants_path"]).filter(pl.col("kept"))
        wanted.update(variants["text"].to_list())
    return wanted


def _shard_generations(runs: Path) -> list[Path]:
    return sorted(runs.glob("*/models/*/shards/*/generations.parquet"))


def _alive(run: subprocess.Popen[str]) -> Callable[[], None]:
    def check() -> None:
        if run.poll() is not None:
            out = run.stdout.read() if run.stdout else ""
            pytest.fail(f"the run ended early (rc {run.returncode}):\n{out[-4000:]}")

    return check


def _waiting_for(condition: Callable[[], bool], alive: Callable[[], None]) -> Callable[[], bool]:
    def done() -> bool:
        alive()
        return condition()

    return done


def test_a_run_rides_out_two_server_restarts(running: RestartableServer, tmp_path: Path) -> None:
    server, starts = running, running.starts
    config = write_inputs(tmp_path / "shared", tmp_path / "root")
    runs, calls = tmp_path / "root" / "runs", tmp_path / "calls.jsonl"
    run = _start(config, calls, server.env)
    alive = _alive(run)
    try:
        # 1: an upgrade (SIGTERM) while the first shard is generating
        _until(_waiting_for(lambda: sum(_generated(calls).values()) >= 3, alive), 300, "shard 1")
        server.stop(signal.SIGTERM)
        time.sleep(DOWN_S)
        server.start()
        # 2: a crash (SIGKILL) once the second shard's generations are written
        _until(_waiting_for(lambda: len(_shard_generations(runs)) >= 2, alive), 300, "shard 2")
        server.stop(signal.SIGKILL)
        time.sleep(DOWN_S)
        server.start()
        output, _ = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
    print(output[-3000:])
    assert run.returncode == 0, output[-4000:]
    assert server.starts == starts + 2
    # each wait is logged, bounded, and ends when the server is back. The second outage may
    # fall where no stage waits (the run's last artifacts are then skipped with a warning):
    # which one is a race, so every wait that began must end, and at least one began.
    assert "unreachable during stage" in output and "(waited" in output
    waits = output.count("retry 1 in")
    assert waits >= 1 and output.count("is back after") == waits, output[-4000:]
    (run_dir,) = run_dirs(runs)
    asked = _generated(calls)
    assert asked == _requests(run_dir)  # nothing generated twice
    assert manifest_problems(run_dir) == []
    stages = json.loads((run_dir / "manifest.json").read_text())["stages"]
    assert {s["path"] for s in stages} >= {"generations.parquet", "summary.parquet"}
    print(f"server restarts survived: 2 of 2 (down {DOWN_S} s each), prompts {len(asked)}")


def test_a_server_away_too_long_stops_the_run_resumably(
    running: RestartableServer, tmp_path: Path
) -> None:
    server = running
    config = write_inputs(tmp_path / "shared", tmp_path / "root")
    runs, calls = tmp_path / "root" / "runs", tmp_path / "calls.jsonl"
    env = {**server.env, "SAGO_SERVER_WAIT_S": "10"}
    run = _start(config, calls, env)
    alive = _alive(run)
    try:
        _until(_waiting_for(lambda: len(_shard_generations(runs)) >= 1, alive), 300, "shard 1")
        server.stop(signal.SIGKILL)
        output, _ = run.communicate(timeout=240)  # the server stays away until the run ends
    finally:
        if run.poll() is None:
            run.kill()
    (run_dir,) = run_dirs(runs)
    # (Prefect's log handler may leave its own line unfinished before sago's)
    errors = [
        line.split("sago: error: ")[-1] for line in output.splitlines() if "sago: error: " in line
    ]
    assert run.returncode == 2 and len(errors) == 1, output[-4000:]
    last = errors[0]
    assert server.env["PREFECT_API_URL"] in last and "unreachable for" in last, last
    assert f"sago resume {run_dir}" in last, last
    assert "unreachable during stage" in output
    finished = {p.parent.name for p in _shard_generations(runs)}
    before = _generated(calls)
    assert finished and not list(run_dir.rglob("*.tmp"))

    server.start()
    resumed = _start(config, calls, env, str(run_dir))
    output, _ = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, output[-4000:]
    stages = json.loads((run_dir / "manifest.json").read_text())["stages"]
    generate = {
        s["path"].split("/")[-2]: s["cache_hit"]
        for s in stages
        if s["stage"].startswith("generate") and "/shards/" in s["path"]
    }
    assert {label for label, hit in generate.items() if hit} >= finished, generate
    # the shards unfinished when the first process stopped are generated now, the finished
    # ones are not (when the server died, every shard may already have been written: a race)
    assert {label for label, hit in generate.items() if not hit} == set(generate) - finished
    after = _generated(calls)
    assert after == _requests(run_dir)  # what the first process asked was not asked again
    assert sum(after.values()) >= sum(before.values())
    assert (run_dir / "summary.parquet").is_file()  # the resume finished what the stop left
    assert manifest_problems(run_dir) == []
    print(f"away too long: stopped with {last!r}; resume reused shards {sorted(finished)}")
