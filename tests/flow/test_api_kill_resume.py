"""Kill a run (SIGKILL) while it is making API calls, start it again: no finished request is
sent twice (counted by the local server) and no spending is booked twice (the ledger). Both
runs talk to the test process's real Prefect server (``server_env``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def _stats(base: str) -> dict:
    with urllib.request.urlopen(f"{base}/_stats", timeout=5) as response:
        return json.loads(response.read())


def _post(base: str, path: str, payload: object) -> None:
    request = urllib.request.Request(
        f"{base}{path}", data=json.dumps(payload).encode(), method="POST"
    )
    urllib.request.urlopen(request, timeout=5).read()


def _run(config: Path, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "sago_cli", "run", "--config", str(config)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def test_killed_during_api_calls_resumes_without_asking_twice(
    server_env: dict[str, str], tmp_path: Path
) -> None:
    port_file = tmp_path / "port"
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.openai_server", "--port-file", str(port_file)], cwd=ROOT
    )
    try:
        for _ in range(100):
            if port_file.exists() and port_file.read_text():
                break
            time.sleep(0.1)
        root = f"http://127.0.0.1:{port_file.read_text()}"
        _post(root, "/_script", [{"action": "delay", "delay": 0.15}])  # slow enough to kill
        config = tmp_path / "run.yaml"
        config.write_text(
            json.dumps(
                {
                    "models": ["litellm:openai/mock-1"],
                    "n": 3,
                    "runs_dir": str(tmp_path / "runs"),
                    "run_id": "api-kill",
                    "api": {"base_url": f"{root}/v1", "concurrency": 2, "backoff_s": 0},
                    # no replay: the server counts by messages, and the replay asks the
                    # base prompt's messages again on purpose (a request of its own);
                    # 18 prompts x (base + 4 register variants) = 90 requests
                    "variants": {
                        "register": {"strengths": [-4, -2, 2, 4], "positions": ["suffix"]},
                        "noise": None,
                        "structural": None,
                        "replay": False,
                    },
                }
            )
        )
        env = {**server_env, "OPENAI_API_KEY": "sk-local"}
        first = _run(config, env)
        deadline = time.time() + 300
        while _stats(root)["total"] < 30 and time.time() < deadline:
            assert first.poll() is None, "the run ended before it could be killed"
            time.sleep(0.2)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
        at_kill = _stats(root)["calls"]
        cache = tmp_path / "runs" / ".cache" / "api"
        finished = len(list(cache.rglob("*.json")))
        assert 0 < finished <= sum(at_kill.values())

        _post(root, "/_script", [])  # full speed for the rest
        second = _run(config, env)
        _, err = second.communicate(timeout=600)
        assert second.returncode == 0, err.decode()[-3000:]
        after = _stats(root)["calls"]
        repeated = {k: n for k, n in after.items() if n > 1}
        # Only requests in flight at the kill (at most `concurrency`) may be asked again.
        assert len(repeated) <= 2, repeated
        assert all(after[k] == 1 for k, n in at_kill.items() if k not in repeated)
        total = sum(after.values())
        ledger = (tmp_path / "runs" / "api-kill" / "api_ledger.jsonl").read_text().splitlines()
        assert len(ledger) <= total  # every booked request was really sent, none twice
        assert len(ledger) >= total - 2  # at most the in-flight ones were sent unbooked
        assert len(list(cache.rglob("*.json"))) == len(after)
        print(
            f"sent before kill {sum(at_kill.values())}, finished {finished}; "
            f"sent on resume {total - sum(at_kill.values())}, asked twice {len(repeated)}, "
            f"booked {len(ledger)} of {total}"
        )
    finally:
        server.kill()
        server.wait()
